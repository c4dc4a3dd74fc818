from __future__ import annotations

from django.urls import path

from skills_app.chat import views

urlpatterns = [
    path("", views.home, name="skills-home"),
    path("c/new/", views.conversation_new, name="conversation-new"),
    path("c/<int:pk>/", views.conversation_detail, name="conversation"),
    path("c/<int:pk>/act/", views.conversation_action, name="conversation-action"),
    path("c/<int:pk>/rename/", views.conversation_rename, name="conversation-rename"),
    path("c/<int:pk>/delete/", views.conversation_delete, name="conversation-delete"),
    path("c/<int:pk>/files/<path:path>", views.conversation_file, name="conversation-file"),
]
