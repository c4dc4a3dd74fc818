from __future__ import annotations

from django.urls import path

from skills_app.audit import costs, decisions, feedback, home, invocations, spend, views

urlpatterns = [
    path("", home.audit_home, name="audit-home"),
    path("export.csv", home.audit_export_csv, name="audit-export-csv"),
    path("invocations/", invocations.invocation_list, name="audit-invocations"),
    path("invocations/<int:pk>/", invocations.invocation_detail, name="audit-invocation"),
    path(
        "skills/<str:skill>/<str:digest>/feedback/",
        feedback.version_feedback,
        name="audit-version-feedback",
    ),
    path("decisions/", decisions.decision_list, name="audit-decisions"),
    path("reviews/", decisions.review_list, name="audit-reviews"),
    path("conversations/", views.conversation_list, name="audit-conversations"),
    path("conversations/<int:pk>/", views.conversation_audit, name="audit-conversation"),
    path(
        "conversations/<int:pk>/runs/<int:run_id>/calls/<int:call>.json",
        views.request_json,
        name="audit-request-json",
    ),
    path(
        "conversations/<int:pk>/export.jsonl",
        views.conversation_export,
        name="conversation-export",
    ),
    path(
        "conversations/<int:pk>/export.md",
        views.conversation_export_markdown,
        name="conversation-export-markdown",
    ),
    path("import/", views.transcript_import, name="transcript-import"),
    path("import/<int:pk>/", views.transcript_import_result, name="transcript-import-result"),
    path("costs/", costs.cost_report, name="audit-costs"),
    path("spend/", spend.spend_report, name="audit-spend"),
]
