"""Pieces the feature admins share, among them the admin's half of the visibility rule.

DESIGN.md "Visibility": the admin hides what the audit hides. For a staff member without the
inspect permission, `HiddenFieldsAdmin` keeps the fields that hold hidden content (HIDDEN_FIELDS)
off every page, and keeps them and the fields whose text may quote hidden content
(QUOTING_FIELDS) out of search, list filters and ordering; a lookup that touches either, typed
into the URL (`?injected_text__contains=...`, `?invocation__injected_text__startswith=...`), is
refused with 400 (Django's DisallowedModelAdminLookup). Quoting fields are shown through the
record's conversation's outbound filter, on read-only admins only (the shown copy is never
saved). A count or an order over a hidden field would be an oracle: one character at a time,
the result count reads the text out.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth.models import User
from django.core.exceptions import FieldDoesNotExist, PermissionDenied
from django.db.models import Model
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest

from skills_app.visibility import INSPECT_PERMISSION, outbound

_M = TypeVar("_M", bound=Model)

# Fields holding hidden content, by model label: never shown to, searched or ordered by people
# without the inspect permission.
HIDDEN_FIELDS: dict[str, frozenset[str]] = {
    "skills_app.skillinvocation": frozenset({"injected_text", "shell_commands", "hooks"}),
    # A hidden row's content (lookups cannot tell hidden rows from visible ones).
    "skills_app.message": frozenset({"content"}),
    # Tool results, hook output and hidden events live in the event data.
    "skills_app.runevent": frozenset({"data"}),
    # SKILL.md of an uploaded version (shown when its package's source is visible to users),
    # and its parsed frontmatter, which is SKILL.md too (hooks' commands, any metadata).
    "skills_app.skillversion": frozenset({"skill_md", "frontmatter"}),
    # The approved manifest quotes the skill's commands exactly (the review page shows it to
    # skill managers, who review the package).
    "skills_app.skillreview": frozenset({"manifest"}),
}
# Fields whose text may quote hidden content (a call that writes a skill's body to a file): shown
# filtered, never searched, filtered or ordered by people without the inspect permission.
QUOTING_FIELDS: dict[str, frozenset[str]] = {
    "skills_app.approval": frozenset({"call_text", "input", "reason", "deny_reason"}),
    # The model's arguments may quote what it read; the tools applied are SKILL.md's own words.
    "skills_app.skillinvocation": frozenset(
        {"args", "error", "status_text", "allowed_tools", "disallowed_tools"}
    ),
    "skills_app.run": frozenset({"error"}),
    # The rule of a decision a review or a skill's allowed-tools made is the skill's own text
    # (`Bash(<the reviewed command>)`).
    "skills_app.permissiondecision": frozenset({"call_text", "input", "reason", "rule_text"}),
}
WITHHELD_PLACEHOLDER = "(hidden: you lack the inspect permission)"


def short_digest(digest: str) -> str:
    return digest[:12]


def sentence(text: str, *, name: str = "", capital: bool = True) -> str:
    """A service message as a sentence: a full stop, and a capital unless it starts with `name`."""
    text = text.strip()
    if not text:
        return text
    if capital and not (name and text.startswith(name)):
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def signed_in_user(request: HttpRequest) -> User:
    """The admin's own user; the admin site lets only signed-in staff this far."""
    user = request.user
    if not isinstance(user, User):
        raise PermissionDenied("Sign in to use the admin.")
    return user


def _label(model: type[Model]) -> str:
    return model._meta.label_lower


def withheld_fields(model: type[Model]) -> frozenset[str]:
    """Hidden and quoting fields of a model: none of them may be searched, filtered or ordered."""
    label = _label(model)
    return HIDDEN_FIELDS.get(label, frozenset()) | QUOTING_FIELDS.get(label, frozenset())


def touches_withheld(model: type[Model], lookup: str) -> bool:
    """True when a lookup path (`a__b__contains`) reaches a withheld field of any model on it."""
    for part in lookup.lstrip("-").split(LOOKUP_SEP):
        try:
            field = model._meta.get_field(part)
        except FieldDoesNotExist:
            return False  # the rest are transforms and lookups (contains, 0, key names)
        if part in withheld_fields(model) or field.name in withheld_fields(model):
            return True
        related = getattr(field, "related_model", None)
        if not field.is_relation or related is None:
            return False
        model = related
    return False


def _filter_item_lookup(item: Any) -> str | None:
    """The field path of a list_filter entry (None for a SimpleListFilter class)."""
    if isinstance(item, str):
        return item
    if isinstance(item, list | tuple) and item and isinstance(item[0], str):
        return item[0]
    return None


class ReadOnlyAdmin(admin.ModelAdmin[_M]):
    """Immutable records: viewable, never added, changed or deleted through the admin."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class HiddenFieldsAdmin(admin.ModelAdmin[_M]):
    """Keeps hidden content away from staff without the inspect permission (module docstring).

    Put it first among the bases. Subclasses that override get_fields, get_search_fields,
    get_list_filter or get_list_display stay covered: the filtering happens in get_fieldsets,
    the changelist and lookup_allowed, which call those.
    """

    @staticmethod
    def inspects(request: HttpRequest) -> bool:
        return bool(request.user.has_perm(INSPECT_PERMISSION))

    def hidden_fields_for(self, obj: _M | None) -> frozenset[str]:
        """The hidden fields of this record (a subclass may show some, e.g. a visible source)."""
        return HIDDEN_FIELDS.get(_label(self.model), frozenset())

    def conversation_id_of(self, obj: _M) -> int | None:
        """Whose hidden texts filter this record's quoting fields."""
        return getattr(obj, "conversation_id", None)

    # -- lookups, search, filters, ordering -------------------------------------------------

    def lookup_allowed(self, lookup: str, value: Any, request: HttpRequest | None = None) -> bool:
        if (request is None or not self.inspects(request)) and touches_withheld(self.model, lookup):
            return False  # the changelist answers 400: a count over hidden text is an oracle
        return bool(super().lookup_allowed(lookup, value, request))

    def get_search_fields(self, request: HttpRequest) -> Any:
        fields = super().get_search_fields(request)
        if self.inspects(request):
            return fields
        return [f for f in fields if not touches_withheld(self.model, f.lstrip("^=@"))]

    def get_list_filter(self, request: HttpRequest) -> Any:
        items = super().get_list_filter(request)
        if self.inspects(request):
            return items
        kept = []
        for item in items:
            lookup = _filter_item_lookup(item)
            if lookup is None or not touches_withheld(self.model, lookup):
                kept.append(item)
        return kept

    def get_list_display(self, request: HttpRequest) -> Any:
        columns = super().get_list_display(request)
        if self.inspects(request):
            return columns
        shown: list[Any] = []
        hidden = HIDDEN_FIELDS.get(_label(self.model), frozenset())
        for column in columns:
            if isinstance(column, str) and column in hidden:
                continue
            ordering = self._ordering_of(column)
            if ordering and touches_withheld(self.model, ordering):
                # `?o=N` orders by any listed column's field: show it, never order by it.
                shown.append(_unordered(column, self))
            else:
                shown.append(column)
        return shown

    def _ordering_of(self, column: Any) -> str:
        if isinstance(column, str):
            try:
                self.model._meta.get_field(column)
            except FieldDoesNotExist:
                target = getattr(self, column, None) or getattr(self.model, column, None)
                return str(getattr(target, "admin_order_field", "") or "")
            return column
        return str(getattr(column, "admin_order_field", "") or "")

    def get_sortable_by(self, request: HttpRequest) -> Any:
        columns = super().get_sortable_by(request)
        if self.inspects(request):
            return columns
        return [c for c in columns if not touches_withheld(self.model, self._ordering_of(c))]

    # -- pages ------------------------------------------------------------------------------

    def get_fieldsets(self, request: HttpRequest, obj: _M | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if self.inspects(request):
            return fieldsets
        hidden = self.hidden_fields_for(obj)
        kept = []
        for name, options in fieldsets:
            fields = [f for f in options.get("fields", ()) if not _names_hidden(f, hidden)]
            if fields:
                kept.append((name, {**options, "fields": fields}))
        return kept

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> _M | None:
        obj = super().get_object(request, object_id, from_field)
        if obj is None or self.inspects(request):
            return obj
        return self.shown_copy(obj, viewer_id=request.user.pk)

    def shown_copy(self, obj: _M, viewer_id: int | None = None) -> _M:
        """A copy of the record as a non-inspector may see it (hidden blanked, quoting filtered).

        Only on read-only admins: a form saves the object it was given, and the copy must never
        be saved. A changeable admin keeps hidden fields off its form (get_fieldsets) instead.
        """
        quoting = QUOTING_FIELDS.get(_label(self.model), frozenset())
        if not isinstance(self, ReadOnlyAdmin):
            if quoting:
                raise TypeError(f"{type(self).__name__}: fields that quote need a read-only admin")
            return obj
        hidden = self.hidden_fields_for(obj)
        if not quoting and not hidden:
            return obj
        shown = copy.copy(obj)
        # Staff are not the conversation's owner: its owner's personal skills are hidden too.
        out = outbound(self.conversation_id_of(obj), can_inspect=False, viewer_id=viewer_id)
        for name in quoting:
            setattr(shown, name, out.value(getattr(obj, name)))
        for name in hidden:
            setattr(shown, name, WITHHELD_PLACEHOLDER)
        return shown

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        base = super().get_changelist(request, **kwargs)
        if self.inspects(request):
            return base
        model_admin = self

        # mypy cannot subclass a class held in a variable (the admin's own ChangeList).
        class ShownChangeList(base):  # type: ignore[misc,valid-type]
            def get_results(self, request: HttpRequest) -> None:
                super().get_results(request)
                # Set by get_results above; the stubs declare it without a type.
                listed = self.result_list  # type: ignore[has-type]
                viewer = request.user.pk
                shown = [model_admin.shown_copy(obj, viewer_id=viewer) for obj in listed]
                self.result_list = shown

        return ShownChangeList


def _names_hidden(entry: Any, hidden: frozenset[str]) -> bool:
    if isinstance(entry, list | tuple):  # a row of fields shown side by side
        return all(_names_hidden(e, hidden) for e in entry)
    return isinstance(entry, str) and entry in hidden


def _unordered(column: Any, model_admin: Any) -> Callable[[Any], Any]:
    """A list column showing the same value without an ordering."""
    if isinstance(column, str) and hasattr(model_admin, column):
        method = getattr(model_admin, column)

        def show(obj: Any) -> Any:
            return method(obj)

        label = getattr(method, "short_description", column.replace("_", " "))
    else:
        name = column if isinstance(column, str) else ""

        def show(obj: Any) -> Any:
            value = getattr(obj, name) if name else column(obj)
            return value if not callable(value) else value()

        try:
            label = str(model_admin.model._meta.get_field(name).verbose_name) if name else ""
        except FieldDoesNotExist:
            label = name.replace("_", " ")
        label = label or getattr(column, "short_description", "")
    # The admin reads a column's label from this attribute; functions do not declare it.
    show.short_description = label  # type: ignore[attr-defined]
    return show
