# django-allauth ships no types: a sign-in through the identity provider, as the adapters see it.
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import models

class SocialAccount(models.Model):
    provider = models.CharField(max_length=200)
    uid = models.CharField(max_length=191)
    extra_data = models.JSONField(default=dict)

class SocialLogin:
    account: SocialAccount
    user: AbstractBaseUser
    state: dict[str, Any]
    @property
    def is_existing(self) -> bool: ...
