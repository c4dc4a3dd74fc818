from __future__ import annotations

from django.urls import path

from skills_app.chat import attachments, feedback, model_views, preferences, shares, views

urlpatterns = [
    path("", views.home, name="skills-home"),
    path("c/new/", views.conversation_new, name="conversation-new"),
    path("c/start/", views.conversation_start, name="conversation-start"),
    path("me/time-zone/", preferences.set_time_zone, name="preferences-time-zone"),
    path("me/theme/", preferences.set_theme, name="preferences-theme"),
    path("me/intro/dismiss/", preferences.dismiss_intro, name="preferences-dismiss-intro"),
    path("c/sidebar/", views.conversation_sidebar, name="conversation-sidebar"),
    path("c/<int:pk>/", views.conversation_detail, name="conversation"),
    path("c/<int:pk>/earlier/", views.conversation_earlier, name="conversation-earlier"),
    path("c/<int:pk>/act/", views.conversation_action, name="conversation-action"),
    path("c/<int:pk>/rename/", views.conversation_rename, name="conversation-rename"),
    path("c/<int:pk>/pin/", views.conversation_pin, name="conversation-pin"),
    path(
        "c/<int:pk>/answers/<int:message_id>/feedback/",
        feedback.answer_feedback,
        name="answer-feedback",
    ),
    path("c/<int:pk>/delete/", views.conversation_delete, name="conversation-delete"),
    path("c/<int:pk>/settings/", model_views.conversation_settings, name="conversation-settings"),
    path(
        "c/<int:pk>/summarise/",
        model_views.conversation_summarise,
        name="conversation-summarise",
    ),
    path("c/<int:pk>/shares/", shares.conversation_shares, name="conversation-shares"),
    path(
        "c/<int:pk>/shares/<int:share_id>/revoke/",
        shares.conversation_share_revoke,
        name="conversation-share-revoke",
    ),
    # A read-only link (signed-in users of this instance only): `chat.shares`.
    path("s/<str:token>/", shares.shared_conversation, name="shared-conversation"),
    path("c/<int:pk>/attach/", attachments.upload, name="conversation-attach"),
    path(
        "c/<int:pk>/attachments/<int:attachment_id>/",
        attachments.download,
        name="conversation-attachment",
    ),
    path(
        "c/<int:pk>/attachments/<int:attachment_id>/remove/",
        attachments.remove,
        name="conversation-attachment-remove",
    ),
    path("c/<int:pk>/files/<path:path>", views.conversation_file, name="conversation-file"),
    path(
        "c/<int:pk>/tools/<str:tool_use_id>/<str:part>.txt",
        views.tool_text,
        name="conversation-tool-text",
    ),
]
