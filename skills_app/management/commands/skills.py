"""`manage.py skills list|validate|catalog|render|import|submit|approve|reject|activate|rollback`:
inspect the skills Skillscope would load, install uploaded skills from the command line, and
take the steps of an organisation skill's review (docs/review.md) as a named person, through
the same service functions, rules and audit rows as the review page."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from skills_app.core.lint import STRICT_RULES
from skills_app.core.registry import SkillRegistry, discover
from skills_app.core.render import render_skill
from skills_app.core.skillfile import Problem, SkillSpec, find_skill_file, lint_skill_dir
from skills_app.models import SkillPackage, SkillReview, SkillVersion
from skills_app.registry import review, uploads
from skills_app.registry.skills import current_catalog, get_registry, registry_for_dirs

CLI_SESSION_ID = "cli"
# Review steps taken here are marked with this origin in the trail.
CLI_ORIGIN = "cli"
REVIEW_STEPS = ("submit", "approve", "reject", "activate", "rollback")


def _problem_json(p: Problem) -> dict[str, Any]:
    return {"rule": p.rule, "message": p.message, "file": p.file, "line": p.line}


class Command(BaseCommand):
    help = "List, validate, catalog, render and import skills; take the steps of their review."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(
            dest="subcommand",
            required=True,
            metavar="{list,validate,catalog,render,import,submit,approve,reject,activate,rollback}",
        )

        def dirs_option(p: Any) -> None:
            p.add_argument(
                "--dir",
                action="append",
                default=[],
                dest="dirs",
                metavar="DIR",
                help="scan this folder instead of the configured ones (repeatable; earlier wins)",
            )

        p = sub.add_parser("list", help="every discovered skill, with its problems")
        dirs_option(p)
        p.add_argument("--json", action="store_true", help="print a JSON array")
        p = sub.add_parser(
            "validate", help="lint a skill folder or a folder of skills; exit 1 on errors"
        )
        p.add_argument("path")
        p.add_argument(
            "--strict",
            action="store_true",
            help="also exit 1 on the warnings where a skill breaks the Agent Skills spec "
            f"({', '.join(sorted(STRICT_RULES))})",
        )
        p = sub.add_parser("catalog", help="print the exact catalog text the model sees")
        dirs_option(p)
        p.add_argument(
            "--budget", type=int, default=None, help="character budget (default: setting)"
        )
        p = sub.add_parser("render", help="print the hidden message a skill would inject")
        p.add_argument("name")
        p.add_argument(
            "skill_args", nargs="*", metavar="ARGS", help="arguments as typed after /NAME"
        )
        dirs_option(p)
        p = sub.add_parser(
            "import",
            help="install a skill (folder, .zip or .skill), a plugin, or a folder of skills",
        )
        p.add_argument("path")
        p.add_argument("--user", default=None, help="the uploader (owner with --personal)")
        p.add_argument(
            "--personal", action="store_true", help="install as the user's personal skill"
        )
        self._add_review_steps(sub)

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"_{options['subcommand']}")(options)

    def _registry(self, options: dict[str, Any]) -> SkillRegistry:
        dirs = options.get("dirs") or []
        return registry_for_dirs([Path(d) for d in dirs]) if dirs else get_registry()

    # --- list ------------------------------------------------------------------------------

    def _list(self, options: dict[str, Any]) -> None:
        registry = self._registry(options)
        winners = {s.name: s for s in registry.skills()}
        rows: list[dict[str, Any]] = []
        for spec in registry.candidates():
            winner = winners[spec.name]
            row = self._spec_row(spec)
            row["shadowed"] = winner is not spec
            row["shadowed_by"] = str(winner.path) if winner is not spec else None
            rows.append(row)
        for failure in registry.failures:
            rows.append(
                {
                    "name": failure.name,
                    "description": None,
                    "source": failure.source,
                    "path": str(failure.path),
                    "digest": None,
                    "loaded": False,
                    "model_invocable": False,
                    "user_invocable": False,
                    "errors": [_problem_json(failure.problem)],
                    "warnings": [],
                    "shadowed": False,
                    "shadowed_by": None,
                }
            )
        rows.sort(key=lambda r: (r["name"], r["shadowed"], r["path"]))
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False))
            return
        for row in rows:
            flags = [
                row["source"],
                "model" if row["model_invocable"] else "",
                "user" if row["user_invocable"] else "",
                f"shadowed by {row['shadowed_by']}" if row["shadowed"] else "",
                "NOT LOADED" if not row["loaded"] else "",
            ]
            self.stdout.write(f"{row['name']}  [{', '.join(f for f in flags if f)}]  {row['path']}")
            if row["description"]:
                self.stdout.write(f"    {' '.join(row['description'].split())[:100]}")
            for key in ("errors", "warnings"):
                for p in row[key]:
                    self.stdout.write(f"    {key[:-1]} [{p['rule']}] {p['message']}")
        for p in registry.source_problems:
            self.stderr.write(str(p))

    @staticmethod
    def _spec_row(spec: SkillSpec) -> dict[str, Any]:
        return {
            "name": spec.name,
            "description": spec.description,
            "when_to_use": spec.when_to_use,
            "source": spec.source,
            "path": str(spec.path),
            "skill_file": str(spec.skill_file),
            "digest": spec.digest,
            "loaded": True,
            "model_invocable": spec.model_invocable,
            "user_invocable": spec.user_invocable,
            "argument_hint": spec.argument_hint,
            "allowed_tools": list(spec.allowed_tools),
            "model": spec.model,
            "errors": [_problem_json(p) for p in spec.errors],
            "warnings": [_problem_json(p) for p in spec.warnings],
        }

    # --- validate --------------------------------------------------------------------------

    def _validate(self, options: dict[str, Any]) -> None:
        path = Path(options["path"]).absolute()
        if not path.is_dir():
            raise CommandError(f"{path} is not a folder; give a skill folder or a folder of skills")
        dirs = [path] if find_skill_file(path) else [Path(f.path) for f in discover(path)]
        if not dirs:
            raise CommandError(f"no SKILL.md found under {path}")
        errors = warnings = overshoots = 0
        for skill_dir in dirs:
            problems = lint_skill_dir(skill_dir)
            errors += sum(p.severity == "error" for p in problems)
            warnings += sum(p.severity == "warning" for p in problems)
            overshoots += sum(p.rule in STRICT_RULES for p in problems)
            status = (
                "ok"
                if not problems
                else "errors"
                if any(p.severity == "error" for p in problems)
                else "warnings"
            )
            self.stdout.write(f"{skill_dir}: {status}")
            for p in problems:
                self.stdout.write(f"  {p}")
        summary = f"{len(dirs)} skill(s) checked: {errors} error(s), {warnings} warning(s)"
        if errors:
            raise CommandError(summary)
        if options["strict"] and overshoots:
            raise CommandError(
                f"{summary}; --strict: {overshoots} of the warnings break a rule of the Agent "
                "Skills spec"
            )
        self.stdout.write(summary)

    # --- catalog / render ------------------------------------------------------------------

    def _catalog(self, options: dict[str, Any]) -> None:
        self.stdout.write(current_catalog(self._registry(options), budget=options["budget"]))

    def _render(self, options: dict[str, Any]) -> None:
        registry = self._registry(options)
        spec = registry.get(options["name"])
        if spec is None:
            names = ", ".join(s.name for s in registry.skills()) or "none"
            raise CommandError(f"no skill named {options['name']!r}; available: {names}")
        words = options["skill_args"]
        # One argument is passed through as typed; several are re-quoted so their split survives.
        args = words[0] if len(words) == 1 else shlex.join(words)
        self.stdout.write(render_skill(spec, args, session_id=CLI_SESSION_ID))

    # --- import ----------------------------------------------------------------------------

    def _import(self, options: dict[str, Any]) -> None:
        path = Path(options["path"]).absolute()
        user = None
        if options["user"]:
            try:
                user = get_user_model().objects.get_by_natural_key(options["user"])
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user named {options['user']!r}") from None
        elif options["personal"]:
            raise CommandError("--personal needs --user NAME: the owner of the personal skill")
        installs: list[Callable[[], list[uploads.InstallResult]]]
        if path.is_file():
            installs = [
                partial(
                    uploads.install_archive,
                    path.read_bytes(),
                    path.name,
                    user=user,
                    personal=options["personal"],
                )
            ]
            label = [path]
        elif path.is_dir():
            folders = self._import_folders(path)
            label = folders
            installs = [
                partial(uploads.install_directory, f, user=user, personal=options["personal"])
                for f in folders
            ]
        else:
            raise CommandError(
                f"{path} does not exist; give a skill folder, a .zip or a .skill file"
            )
        failed = 0
        for where, install in zip(label, installs, strict=True):
            try:
                results = install()
            except uploads.UploadError as exc:
                failed += 1
                self.stderr.write(f"{where}: refused: {exc.message}")
                for p in exc.problems:
                    self.stderr.write(f"  {p}")
                continue
            for result in results:
                self.stdout.write(result.message)
                for p in result.warnings:
                    self.stdout.write(f"  {p}")
        if failed:
            raise CommandError(f"{failed} of {len(installs)} upload(s) refused")

    @staticmethod
    def _import_folders(path: Path) -> list[Path]:
        """The folder itself when it is a skill or a plugin, else each skill folder inside it."""
        if find_skill_file(path) or (path / "skills").is_dir():
            return [path]
        folders = sorted(p for p in path.iterdir() if p.is_dir() and find_skill_file(p))
        return folders or [path]

    # --- the review: submit, approve, reject, activate, rollback ---------------------------

    @staticmethod
    def _add_review_steps(sub: Any) -> None:
        helps = {
            "submit": "send a draft (or a version sent back) of an organisation skill to review",
            "approve": "approve a submitted version with the command manifest you read",
            "reject": "send a submitted version back to its author with the reason",
            "activate": "make an approved version the one everyone gets",
            "rollback": "make an earlier approved version the active one again",
        }
        for step in REVIEW_STEPS:
            p = sub.add_parser(step, help=helps[step])
            p.add_argument("name", help="the organisation skill")
            p.add_argument(
                "--version",
                type=int,
                default=None,
                metavar="V",
                help="the version number (default: the newest; for rollback, the newest "
                "approved one before the active version)",
            )
            p.add_argument(
                "--as",
                dest="as_user",
                required=True,
                metavar="USER",
                help="who takes the step: their permissions and name go in the trail",
            )
            if step == "reject":
                p.add_argument("--reason", required=True, help="what should change (to the author)")
            elif step in ("submit", "approve"):
                p.add_argument("--comment", default="", help="a note kept in the trail")
            if step == "approve":
                p.add_argument(
                    "--manifest",
                    default="",
                    metavar="DIGEST",
                    help="the digest of the command manifest you read (printed by submit, "
                    "shown on the review page); without it the manifest is printed",
                )

    def _submit(self, options: dict[str, Any]) -> None:
        version, user = self._step_target(options)
        self._step(
            lambda: review.submit(version, user, comment=options["comment"], origin=CLI_ORIGIN)
        )
        digest = review.manifest_of(version).digest
        self.stdout.write(
            f"{self._label(version)}: submitted for review. Its command manifest is {digest}: a "
            f"reviewer approves it with `skills approve {version.package.name} --version "
            f"{version.number} --manifest {digest} --as NAME` after reading the package "
            f"({reverse('skill-review', args=[version.pk])})."
        )

    def _approve(self, options: dict[str, Any]) -> None:
        version, user = self._step_target(options)
        if not options["manifest"]:
            refusal = review.approve_refusal(version, user) or review.unshown(version)
            if refusal:
                raise CommandError(refusal)
            manifest = self._step(lambda: review.manifest_of(version))
            self._print_manifest(version, manifest)
            raise CommandError(
                f"{self._label(version)}: approving needs --manifest DIGEST, the digest of the "
                f"command manifest you read ({manifest.digest}, listed above), after reading the "
                f"whole package ({reverse('skill-review', args=[version.pk])}); run again with "
                f"--manifest {manifest.digest}"
            )
        step = self._step(
            lambda: review.approve(
                version,
                user,
                manifest_digest=options["manifest"],
                comment=options["comment"],
                origin=CLI_ORIGIN,
            )
        )
        consented = sum(1 for e in step.manifest if e.get("consent"))
        self.stdout.write(
            f"{self._label(version)}: approved by {step.actor_name} with the command manifest "
            f"{step.manifest_digest} ({len(step.manifest)} entries, {consented} consented). Make "
            f"it live with `skills activate {version.package.name} --version {version.number} "
            "--as NAME`."
        )

    def _reject(self, options: dict[str, Any]) -> None:
        version, user = self._step_target(options)
        self._step(
            lambda: review.request_changes(
                version, user, comment=options["reason"], origin=CLI_ORIGIN
            )
        )
        self.stdout.write(f"{self._label(version)}: sent back to its author with your reason.")

    def _activate(self, options: dict[str, Any]) -> None:
        version, user = self._step_target(options)
        active = version.package.active_version
        if active is not None and active.number > version.number:
            raise CommandError(
                f"{self._label(version)} is older than the active v{active.number}: making it "
                f"active is a rollback; run `skills rollback {version.package.name} --version "
                f"{version.number} --as {user.get_username()}`"
            )
        self._activated(version, user)

    def _rollback(self, options: dict[str, Any]) -> None:
        version, user = self._step_target(options)
        active = version.package.active_version
        if active is None or active.number <= version.number:
            now = f"the active version is v{active.number}" if active else "nothing is active"
            raise CommandError(
                f"{self._label(version)}: a rollback goes to a version older than the active "
                f"one, and {now}; use `skills activate` to go forward"
            )
        self._activated(version, user)

    def _activated(self, version: SkillVersion, user: Any) -> None:
        step = self._step(lambda: review.activate(version, user, origin=CLI_ORIGIN))
        rolled = step.action == SkillReview.ROLLED_BACK
        self.stdout.write(
            f"{self._label(version)} is now the active version for everyone "
            f"({'rolled back: ' if rolled else ''}{step.comment}); the next turn of every "
            "conversation gets it."
        )

    # The steps' shared parts.

    @staticmethod
    def _label(version: SkillVersion) -> str:
        return f"{version.package.name} v{version.number}"

    @staticmethod
    def _step(take: Callable[[], Any]) -> Any:
        """Take a step of the review; its refusal as the command's error (exit status 1)."""
        try:
            return take()
        except review.ReviewError as exc:
            raise CommandError(exc.message) from None

    def _step_target(self, options: dict[str, Any]) -> tuple[SkillVersion, Any]:
        """The version named by NAME and --version, and the active user named by --as."""
        user = self._review_user(options["as_user"])
        package = self._org_package(options["name"])
        versions = package.versions.select_related("package", "uploaded_by").order_by("-number")
        number = options["version"]
        if number is not None:
            version = versions.filter(number=number).first()
            if version is None:
                raise CommandError(
                    f"{package.name} has no version {number}; its versions: "
                    f"{self._versions_words(package)}"
                )
            return version, user
        if options["subcommand"] == "rollback":
            active = package.active_version
            earlier = versions.filter(review_status=SkillVersion.APPROVED)
            if active is not None:
                earlier = earlier.filter(number__lt=active.number)
            version = earlier.first()
            if version is None or active is None:
                raise CommandError(
                    f"{package.name} has no approved version before the active one to roll back "
                    f"to; its versions: {self._versions_words(package)}"
                )
            return version, user
        newest = versions.first()
        if newest is None:
            raise CommandError(f"{package.name} has no versions; upload one with `skills import`")
        return newest, user

    @staticmethod
    def _review_user(name: str) -> Any:
        model = get_user_model()
        try:
            user = model.objects.get_by_natural_key(name)
        except model.DoesNotExist:
            raise CommandError(f"no user named {name!r}; --as names an existing account") from None
        if not user.is_active:
            raise CommandError(f"the account {name!r} is deactivated; it takes no review steps")
        return user

    @staticmethod
    def _org_package(name: str) -> SkillPackage:
        package = (
            SkillPackage.objects.select_related("active_version")
            .filter(name=name, owner__isnull=True)
            .first()
        )
        if package is not None:
            return package
        names = list(
            SkillPackage.objects.filter(owner__isnull=True)
            .order_by("name")
            .values_list("name", flat=True)[:21]
        )
        known = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "") or "none yet"
        personal = SkillPackage.objects.filter(name=name, owner__isnull=False).exists()
        why = " (a personal skill of that name needs no review)" if personal else ""
        raise CommandError(
            f"no organisation skill named {name!r}{why}; organisation skills: {known}"
        )

    @staticmethod
    def _versions_words(package: SkillPackage) -> str:
        words = []
        for v in package.versions.order_by("number"):
            active = ", active" if package.active_version_id == v.pk else ""
            words.append(f"v{v.number} ({v.get_review_status_display()}{active})")
        return ", ".join(words) or "none"

    def _print_manifest(self, version: SkillVersion, manifest: Any) -> None:
        self.stdout.write(f"The command manifest of {self._label(version)} ({manifest.digest}):")
        if not manifest.entries:
            self.stdout.write("  (no commands and no pre-approved tools)")
        for e in manifest.entries:
            mark = "consented" if e.consent else "asks the user"
            self.stdout.write(f"  [{mark}] {e.kind_words}: {e.text}  ({e.where})")
            if e.note:
                self.stdout.write(f"      {e.note}")
