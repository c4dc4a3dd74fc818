from __future__ import annotations

from django.urls import path

from skills_app.permissions import views

urlpatterns = [
    path("", views.rules_page, name="rules-page"),
    path("add/", views.rule_add, name="rule-add"),
    path("<int:pk>/edit/", views.rule_edit, name="rule-edit"),
    path("<int:pk>/delete/", views.rule_delete, name="rule-delete"),
]
