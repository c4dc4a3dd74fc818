# django-allauth ships no types.
from django.dispatch import Signal

user_logged_in: Signal
