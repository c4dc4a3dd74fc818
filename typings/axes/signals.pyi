# django-axes ships no types.
from django.dispatch import Signal

user_locked_out: Signal
