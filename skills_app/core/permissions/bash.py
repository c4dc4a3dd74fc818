"""Bash calls: deny that holds through any nesting, writes as Write calls, allow part by part.

Order, for a Bash call (and for `skill_run`, `!` dynamic context and hooks, which are decided
as Bash calls):

1. deny rules, matched against every subject: the whole command, every simple command found
   anywhere by `shell.analyze` (as written, as bash reads its words, under any wrapper), and
   the parts the old text splitter finds (kept as a second opinion);
2. hidden code (`ShellAnalysis.hidden`: bash may run a command the parser cannot read, e.g.
   `$CMD x`, `eval "$x"`, `${x@P}`, arithmetic over a value that is not a literal integer) is
   denied while any Bash deny rule with a specifier is in force: it could be that command
   (docs/security.md, "Expansions are code");
3. output redirections and `tee` files, each decided as a `Write` call (`Edit(...)` rules and
   the Write default apply): a deny there denies the command (outside the workspace Write is
   denied by default);
4. ask rules, against the same subjects;
5. a conversation grant of exactly this command text, or a bare `Bash` allow rule, allows
   (a bare allow still asks for hidden code while a Bash ask rule with a specifier exists: that
   rule could be walked around);
6. a write held back by a Write ask rule, or to an unknown target (`> $F`, or a relative one
   after `cd`) asks; a write inside the workspace needs nothing more (any allowed command
   could write there anyway); anything dynamic (`ShellAnalysis.opaque`: eval of literal text,
   arithmetic, `$IFS`, process substitution...) asks: never allowed;
7. allow when every simple command is matched by an allow rule: as written, as bash reads it
   with its wrappers looked through (`command ls` is `ls`), or with the wrappers `timeout`,
   `nice`, `nohup`, `time` and `xargs` stripped. `VAR=x` prefixes and `env`'s assignments stay
   in front for allow (they can change what a command does).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from ..rulematch import bash_subjects, command_regex, is_inside, literal_text, strip_wrappers
from .model import Decision, PermissionContext, Rule, ToolCall, describe
from .shell import WORKSPACE, ShellAnalysis, SimpleCommand, analyze

DecideFn = Callable[[ToolCall, PermissionContext], Decision]


def deny_subjects(command: str, analysis: ShellAnalysis) -> list[str]:
    """Everything deny and ask rules are matched against, without duplicates."""
    subjects = [command, *bash_subjects(command), *analysis.loose_subjects]
    for simple in analysis.commands:
        subjects += simple.deny_subjects
        subjects += [strip_wrappers(s) for s in simple.deny_subjects]
    return list(dict.fromkeys(s.strip() for s in subjects if s.strip()))


def _matches(rule: Rule, subjects: list[str]) -> bool:
    if rule.specifier is None:
        return True
    regex = command_regex(rule.specifier)
    return any(regex.fullmatch(subject) for subject in subjects)


def _write_decisions(
    analysis: ShellAnalysis, context: PermissionContext, workspace: str, decide: DecideFn
) -> tuple[Decision | None, str | None]:
    """(a deny for some write target, else None; why some write is not allowed, else None).

    Inside the workspace a redirection needs no more than the command itself: any allowed
    command could write there anyway. So only a Write deny, a Write *rule* that asks, a target
    outside the workspace, a file that steers programs (`steering`), or one that cannot be known
    holds the command back.
    """
    pending: str | None = None
    for target in analysis.writes:
        if target is None:
            pending = pending or "it writes to a file whose name is computed at run time"
            continue
        if target.startswith(WORKSPACE):
            path = workspace + target[len(WORKSPACE) :]
        elif target.startswith("/"):
            path = target
        elif analysis.changes_dir:
            pending = pending or f"it changes directory, then writes {target!r}"
            continue
        else:
            path = posixpath.join(workspace, target)
        path = posixpath.normpath(path)
        shown = target.replace(WORKSPACE, "$WORKSPACE")
        decision = decide(ToolCall("Write", {"file_path": path}), context)
        if decision.behavior == "deny":
            why = f"the command writes {shown} (a redirection or tee), and Write is denied"
            return Decision("deny", f"{why}: {decision.reason}", decision.rule), None
        inside = is_inside(path, workspace)
        held = decision.rule is not None or not inside or decision.protected
        if decision.behavior == "ask" and held:
            where = "" if inside else " outside the workspace"
            pending = pending or f"it writes {shown}{where}, which asks ({decision.reason})"
    return None, pending


def _allow_forms(simple: SimpleCommand) -> list[str]:
    joined, assignments = simple.joined, simple.assignments
    with_env = " ".join([*assignments, joined]) if assignments else joined
    forms = [simple.text, strip_wrappers(simple.text), with_env, strip_wrappers(with_env)]
    if simple.resolved:
        # The command under the wrappers looked through, e.g. `ls` for `command ls`.
        forms.append(" ".join([*assignments, *simple.resolved]))
    return list(dict.fromkeys(forms))


def _allow_each(analysis: ShellAnalysis, allows: list[Rule]) -> Decision | None:
    """Allow when an allow rule matches every simple command; None otherwise."""
    if not analysis.commands:
        return None
    used: list[Rule] = []
    for simple in analysis.commands:
        forms = _allow_forms(simple)
        rule = next((r for r in allows if _matches(r, forms)), None)
        if rule is None:
            return None
        if rule not in used:
            used.append(rule)
    return Decision("allow", "; ".join(describe(r) for r in used), used[0])


def _could_be_denied(analysis: ShellAnalysis, rules: list[Rule]) -> Decision | None:
    """Deny a command that may run code the parser cannot read while a Bash deny rule is in
    force: that code could be the denied command (docs/security.md, "Expansions are code")."""
    if not analysis.hidden:
        return None
    rule = next((r for r in rules if r.behavior == "deny" and r.specifier is not None), None)
    if rule is None:
        return None
    why = analysis.hidden[0]
    more = f" (and {len(analysis.hidden) - 1} more)" if len(analysis.hidden) > 1 else ""
    reason = (
        f"Bash: {why}{more}. Bash could run a command the rules cannot read, and "
        f"{describe(rule)} is in force, so it is denied"
    )
    return Decision("deny", reason, rule)


def decide_bash(
    call: ToolCall,
    context: PermissionContext,
    rules: list[Rule],
    workspace: str,
    decide: DecideFn,
) -> Decision | None:
    """The decision for a Bash call, or None to fall back to the default."""
    raw = call.input.get("command")
    command = raw.strip() if isinstance(raw, str) else ""
    analysis = analyze(command)
    subjects = deny_subjects(command, analysis)
    for rule in rules:
        if rule.behavior == "deny" and _matches(rule, subjects):
            return Decision("deny", describe(rule), rule)
    hidden = _could_be_denied(analysis, rules)
    if hidden is not None:
        return hidden
    write_deny, write_pending = _write_decisions(analysis, context, workspace, decide)
    if write_deny is not None:
        return write_deny
    for rule in rules:
        if rule.behavior == "ask" and _matches(rule, subjects):
            return Decision("ask", describe(rule), rule)
    allows = [r for r in rules if r.behavior == "allow"]
    for rule in allows:
        if command and rule.specifier is not None and literal_text(rule.specifier) == command:
            return Decision("allow", describe(rule), rule)  # this exact text was approved
    guarded = any(r.specifier is not None and r.behavior != "allow" for r in rules)
    blind = "; ".join(analysis.opaque)
    # A bare allow trusts every command the rules can read; what they cannot read (hidden
    # code) could walk around an ask rule.
    walks_around = bool(analysis.hidden) and guarded
    for rule in allows:
        if rule.specifier is None and not walks_around:
            return Decision("allow", describe(rule), rule)
    if write_pending:
        return Decision("ask", f"Bash: {write_pending}", None)
    if blind:
        return Decision("ask", f"Bash: this is not allowed without asking: {blind}", None)
    return _allow_each(analysis, allows)
