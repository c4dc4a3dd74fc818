from __future__ import annotations

from django.urls import path

from skills_app.skills import review_views
from skills_app.skills import views as skills_views

urlpatterns = [
    path("", skills_views.skills_page, name="skills-page"),
    path("upload/", skills_views.skills_upload, name="skills-upload"),
    path("org/upload/", review_views.org_upload, name="skills-org-upload"),
    path("versions/<int:pk>/review/", review_views.review_version, name="skill-review"),
    path("s/<str:name>/", review_views.skill_detail, name="skill-detail"),
    path("packages/<int:pk>/enable/", skills_views.package_enable, name="skills-package-enable"),
    path("packages/<int:pk>/delete/", skills_views.package_delete, name="skills-package-delete"),
]
