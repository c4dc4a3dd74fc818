"""Send one message from the command line and print the visible transcript of that turn.

The command waits for everything the run starts, as a browser's run would have it done: the
messages queued meanwhile (in a browser tab) are sent and answered, and a new conversation gets
its title, before the command prints and exits.
"""

from __future__ import annotations

import asyncio
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from skills_app.chat.presenters import message_plain_text
from skills_app.core.model_catalog import UnknownModelError, choose_model
from skills_app.core.profiles import DEFAULT_PROFILE
from skills_app.models import Approval, Conversation, Message
from skills_app.runs import supervisor as runs


class Command(BaseCommand):
    help = (
        "Send MESSAGE (a slash command works too) to a conversation, run the agent, and print "
        "the visible transcript of that turn. Hidden skill instructions are never printed."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("message", help='Text to send, e.g. "hello" or "/release-notes v2"')
        parser.add_argument("--conversation", type=int, help="Continue this conversation id.")
        parser.add_argument("--user", help="Username (default: the first administrator).")
        parser.add_argument(
            "--profile",
            choices=[value for value, _label in Conversation.PROFILE_CHOICES],
            default=DEFAULT_PROFILE,
            help=f"Delivery profile of a new conversation (default: {DEFAULT_PROFILE}).",
        )
        parser.add_argument(
            "--model",
            help="Model of this conversation, one of ANTHROPIC_MODELS "
            "(default: the conversation's model, or ANTHROPIC_MODEL for a new one).",
        )
        parser.add_argument(
            "--yes",
            action="store_true",
            help='Answer every approval with "allow once" (without it, approvals are denied).',
        )

    def handle(self, *args: Any, **options: Any) -> None:
        model = self._model(options.get("model"))
        user = self._user(options.get("user"))
        conversation = self._conversation(user, options.get("conversation"), options["profile"])
        if model and conversation.model != model:
            conversation.model = model
            conversation.save(update_fields=["model"])
        before = conversation.messages.count() and (
            conversation.messages.order_by("-seq").values_list("seq", flat=True).first() or 0
        )
        answer = Approval.ALLOW_ONCE if options["yes"] else Approval.DENY
        try:
            run = asyncio.run(self._run(conversation.pk, options["message"], user.pk, answer))
        except runs.RunError as exc:
            raise CommandError(str(exc)) from exc
        label = run.model_label or run.model
        self.stdout.write(f"[conversation {conversation.pk} · {label}]")
        for row in conversation.messages.filter(seq__gt=before, is_meta=False).order_by("seq"):
            self._print(row)
        if not options["yes"] and run.approvals.filter(status=Approval.DENY).exists():
            self.stdout.write(
                "(Approvals were denied because no one could answer them; "
                "re-run with --yes to allow them once.)"
            )
        run.refresh_from_db()
        if run.status == run.FAILED:
            self.stdout.write(self.style.ERROR(f"Run failed: {run.error}"))
        conversation.refresh_from_db(fields=["title"])
        self.stdout.write(f"title: {conversation.title}")
        self.stdout.write(f"conversation id: {conversation.pk}")

    async def _run(self, conversation_id: int, text: str, user_id: int, answer: str) -> Any:
        try:
            run = await runs.start_run(conversation_id, text, user_id=user_id, auto_answer=answer)
            await runs.wait_for_run(run.pk)
            # The runs its end started (queued messages) and their after-work, to their end.
            await runs.drain()
        finally:
            # Only on an error (Ctrl-C included) is anything left: stopped on purpose, not by
            # the event loop closing under a write.
            await runs.shutdown()
        run.status = (await run.__class__.objects.aget(pk=run.pk)).status
        return run

    def _model(self, model: str | None) -> str | None:
        if model is None:
            return None
        try:
            return choose_model(model, settings.ANTHROPIC_MODELS)
        except UnknownModelError as exc:
            raise CommandError(f"--model: {exc}") from None

    def _user(self, username: str | None) -> Any:
        User = get_user_model()
        if username:
            try:
                return User.objects.get(username=username)
            except User.DoesNotExist:
                raise CommandError(
                    f'No user "{username}". Create one in the admin first.'
                ) from None
        user = User.objects.filter(is_superuser=True).order_by("pk").first()
        if user is None:
            raise CommandError("No users yet. Run `python manage.py bootstrap` or pass --user.")
        return user

    def _conversation(self, user: Any, conversation_id: int | None, profile: str) -> Conversation:
        if conversation_id is None:
            # Titled after its first answer, as one started in the browser.
            return Conversation.objects.create(owner=user, profile=profile)
        try:
            return Conversation.objects.owned_by(user).get(pk=conversation_id)
        except Conversation.DoesNotExist:
            raise CommandError(
                f"Conversation {conversation_id} does not exist or belongs to another user."
            ) from None

    def _print(self, row: Message) -> None:
        text = message_plain_text(row)
        if text:
            self.stdout.write(text)
