# django-axes ships no types: the failed sign-ins it counts (read by skills_app/accounts/lockout.py).
from django.db import models

class AccessBase(models.Model):
    user_agent = models.CharField(max_length=255)
    ip_address = models.GenericIPAddressField(null=True)
    username = models.CharField(max_length=255, null=True)
    http_accept = models.CharField(max_length=1025)
    path_info = models.CharField(max_length=255)
    attempt_time = models.DateTimeField(auto_now_add=True)

class AccessAttempt(AccessBase):
    get_data = models.TextField()
    post_data = models.TextField()
    failures_since_start = models.PositiveIntegerField()
