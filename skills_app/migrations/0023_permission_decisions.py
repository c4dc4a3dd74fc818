"""Every permission decision of a run, with what decided it."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("skills_app", "0022_reviews_of_live_skills"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="PermissionDecision",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("tool", models.CharField(max_length=100)),
                (
                    "call_text",
                    models.TextField(help_text="The call in rule syntax, e.g. Bash(git status)."),
                ),
                ("input", models.JSONField(blank=True, default=dict)),
                (
                    "decision",
                    models.CharField(
                        choices=[
                            ("allow", "allowed"),
                            ("deny", "denied"),
                            ("refused", "refused without asking (it quoted hidden skill text)"),
                            ("ask", "asked (not answered here)"),
                        ],
                        max_length=10,
                    ),
                ),
                (
                    "source",
                    models.CharField(
                        choices=[
                            ("admin", "admin rule"),
                            ("review", "the skill's reviewed manifest"),
                            ("skill", "the skill's allowed-tools"),
                            ("conversation", 'a user\'s "allow for this conversation"'),
                            ("user", "the user's answer"),
                            ("default", "default"),
                            ("hidden", "hidden skill text in the call"),
                        ],
                        max_length=20,
                    ),
                ),
                ("rule_text", models.CharField(blank=True, max_length=1000)),
                (
                    "rule_id",
                    models.IntegerField(blank=True, help_text="The admin rule's id.", null=True),
                ),
                ("reason", models.TextField(blank=True)),
                (
                    "skill",
                    models.CharField(
                        blank=True, help_text="The skill active in the turn.", max_length=200
                    ),
                ),
                ("reviewer_name", models.CharField(blank=True, max_length=200)),
                ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                (
                    "approval",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="skills_app.approval",
                    ),
                ),
                (
                    "approver",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "conversation",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="permission_decisions",
                        to="skills_app.conversation",
                    ),
                ),
                (
                    "reviewer",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="skills_app.run",
                    ),
                ),
                (
                    "review",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="skills_app.skillreview",
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-pk"],
            },
        ),
    ]
