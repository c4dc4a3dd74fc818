"""Existing installs: what the review status of versions stored before reviews existed is.

- a personal version needs no review: `personal`;
- the active version of an organisation skill was live for everyone: it stays live, marked
  `approved`, with an "approved by migration" step in its trail saying that nobody reviewed it.
  No manifest is stored for it, so it grants no reviewer's consent: its calls are decided by
  the rules and the user, as before, until a skill manager reviews it;
- every other organisation version (an older one, or a candidate never made active) becomes a
  `draft`: it must be submitted and approved before it can be made active.
"""

from django.db import migrations


def mark(apps, schema_editor):
    SkillVersion = apps.get_model("skills_app", "SkillVersion")
    SkillPackage = apps.get_model("skills_app", "SkillPackage")
    SkillReview = apps.get_model("skills_app", "SkillReview")
    SkillVersion.objects.filter(package__owner__isnull=False).update(review_status="personal")
    SkillVersion.objects.filter(package__owner__isnull=True).update(review_status="draft")
    live = SkillPackage.objects.filter(owner__isnull=True, active_version__isnull=False)
    for package in live.select_related("active_version"):
        version = package.active_version
        SkillVersion.objects.filter(pk=version.pk).update(review_status="approved")
        SkillReview.objects.create(
            version=version,
            package_name=package.name,
            version_number=version.number,
            action="approved_by_migration",
            actor=None,
            actor_name="",
            digest=version.digest,
            comment=(
                "This version was active for everyone before skill reviews existed. It stays "
                "live, but nobody has reviewed it: its commands get no reviewer's consent "
                "until a skill manager reviews it."
            ),
        )


def unmark(apps, schema_editor):
    SkillReview = apps.get_model("skills_app", "SkillReview")
    SkillReview.objects.filter(action="approved_by_migration").delete()


class Migration(migrations.Migration):
    dependencies = [("skills_app", "0021_skill_review")]

    operations = [migrations.RunPython(mark, unmark)]
