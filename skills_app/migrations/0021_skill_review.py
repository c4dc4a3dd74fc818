"""Reviews of organisation skill versions: the status of each version and the trail of steps."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("skills_app", "0019_text_choices"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="skillversion",
            options={
                "ordering": ["package", "-number"],
                "permissions": [
                    ("review_skillversion", "Can review and approve organisation skill versions")
                ],
            },
        ),
        migrations.AddField(
            model_name="skillversion",
            name="review_status",
            field=models.CharField(
                choices=[
                    ("draft", "draft"),
                    ("submitted", "submitted for review"),
                    ("changes_requested", "changes requested"),
                    ("approved", "approved"),
                    ("personal", "personal (no review)"),
                ],
                default="draft",
                max_length=20,
            ),
        ),
        migrations.CreateModel(
            name="SkillReview",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("package_name", models.CharField(max_length=200)),
                ("version_number", models.PositiveIntegerField()),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("uploaded", "uploaded as a draft"),
                            ("submitted", "submitted for review"),
                            ("approved", "approved"),
                            ("changes_requested", "changes requested"),
                            ("activated", "made active"),
                            ("rolled_back", "rolled back to"),
                            (
                                "approved_by_migration",
                                "approved by migration (it was live before reviews existed)",
                            ),
                        ],
                        max_length=30,
                    ),
                ),
                ("actor_name", models.CharField(blank=True, max_length=200)),
                (
                    "digest",
                    models.CharField(help_text="The version digest the person saw.", max_length=64),
                ),
                ("manifest", models.JSONField(blank=True, default=list)),
                ("manifest_digest", models.CharField(blank=True, max_length=64)),
                ("comment", models.TextField(blank=True)),
                (
                    "origin",
                    models.CharField(
                        blank=True,
                        help_text="Where an uploaded version came from (upload, cli, git).",
                        max_length=40,
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                (
                    "actor",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "version",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="reviews",
                        to="skills_app.skillversion",
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-pk"],
            },
        ),
    ]
