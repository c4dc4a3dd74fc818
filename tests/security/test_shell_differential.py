"""Bash itself is the oracle (issue 23): random shell constructs around a denied and an allowed
command, decided by the rule engine and then run for real.

A generator wraps `rm work/t` (denied by `deny Bash(rm *)`), `echo hi` (allowed by
`allow Bash(echo *)`) and `touch work/p` (allowed by nothing) in the constructs of
docs/security.md, "Expansions are code": spellings of the name (quotes, escapes, `$'...'`,
`$"..."`, backslash-newline, brace expansion, `$IFS`, absolute paths, expansions), wrappers
(`command`, `exec -a`, `nice`, `timeout`, `env -S`, `coproc`, `xargs`, `find -exec`...), code in
strings (`eval`, `bash -c`, `trap`, `source /dev/stdin`, here-documents, `mapfile -C`,
`compgen`), values evaluated as code (`${x@P}`, `${!x}`, `$((x))`, `let`, `[[ -eq ]]`,
`declare -i`, subscripts given to `read`, `printf -v`, `test -v`), `PS4` with `set -x`,
`hash -p`, and the structures of the language (subshells, groups, functions, loops, `case`,
`$( )`, `<( )`, `>( )`, pipelines), nested. Every candidate runs with the real bash inside the
project's bubblewrap sandbox with a PATH of recording shims (`shell_oracle.py`: the real `rm`
is unreachable, also as `/bin/rm`, `command -p rm` or through `env`). The test fails when

- `rm` ran while the engine, with a deny rule on `rm`, said allow or ask, or
- the engine said allow and a program its allow rules do not name ran.

Every bypass found this way goes into `shell_bypass_corpus.json`, which
`test_shell_bypass_corpus.py` replays on every run.

The normal run tries EXAMPLES candidates (about 25 s on a shared, busy machine). A deep run:

    HYPOTHESIS_PROFILE=shell-deep .venv/bin/python -m pytest \\
        tests/security/test_shell_differential.py -p no:cacheprovider

tries 20,000 (25 to 45 minutes at a load average of 8 to 11 on 2 cores).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skills_app.core.permissions import PermissionContext, ToolCall, decide, parse_rule
from tests.security.shell_oracle import Oracle, Ran, available

EXAMPLES = 150
settings.register_profile(
    "shell-deep",
    max_examples=20_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "")
_SETTINGS = (
    settings.get_profile("shell-deep")
    if _PROFILE == "shell-deep"
    else settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
)
WS = Path("/srv/ws/conv-1")
DENY_RM = ("deny", "Bash(rm *)")
ALLOW_ECHO = ("allow", "Bash(echo *)")
# Rule sets and the programs each lets run without asking.
RULE_SETS: list[tuple[list[tuple[str, str]], Callable[[str], bool]]] = [
    ([DENY_RM, ALLOW_ECHO], lambda program: program == "echo"),
    ([DENY_RM, ("allow", "Bash")], lambda program: program != "rm"),
    ([ALLOW_ECHO], lambda program: program == "echo"),
]
COMMANDS = {"rm": "work/t", "echo": "hi", "touch": "work/p"}

pytestmark = pytest.mark.skipif(bool(available()), reason=available() or "")


def q(text: str) -> str:
    """Single-quote text for the shell."""
    return "'" + text.replace("'", "'\\''") + "'"


def decision(command: str, rules: list[tuple[str, str]]) -> str:
    context = PermissionContext(workspace=WS, admin_rules=[parse_rule(r, b) for b, r in rules])
    return decide(ToolCall("Bash", {"command": command}), context).behavior


def violations(command: str, ran: Ran) -> list[str]:
    """What the engine let through that bash really ran, per rule set."""
    found = []
    for rules, allowed in RULE_SETS:
        said = decision(command, rules)
        denies_rm = DENY_RM in rules
        if denies_rm and "rm" in ran.programs() and said != "deny":
            found.append(f"rm ran while the engine said {said} under {rules}")
        strays = sorted(p for p in ran.programs() if not allowed(p))
        if said == "allow" and strays:
            found.append(f"{strays} ran while the engine said allow under {rules}")
    return found


# --- the generator -------------------------------------------------------------------------


def _spellings(name: str) -> list[tuple[str, str]]:
    """(statements before, the word) for ways of writing a program name."""
    first, rest = name[0], name[1:]
    hexed = "".join(f"\\x{ord(c):02x}" for c in name)
    octal = "".join(f"\\{ord(c):03o}" for c in name)
    return [
        ("", name), ("", "\\" + name), ("", f"{first}''{rest}"), ("", f"'{first}'{rest}"),
        ("", f'"{name}"'), ("", f'{first}""{rest}'), ("", f"$'{hexed}'"), ("", f"$'{octal}'"),
        ("", f'$"{name}"'), ("", f"{first}\\\n{rest}"), ("", f"/usr/bin/{name}"),
        ("", f"/bin/{name}"), ("", f"{{{first}..{first}}}{rest}"), ("", f"{{{name},}}"),
        ("", f"{first}{{{rest},}}"), ("", f"{first}$'{rest}'"),
        (f"v={name}; ", "$v"), (f"v={name}; ", '"$v"'), ("", f'"$(printf %s {name})"'),
        ("", f"`echo {name}`"), ("", f"${{v:-{name}}}"), (f"v={first}; ", f"${{v}}{rest}"),
        (f"v=({name}); ", '"${v[@]}"'), (f"v={name}; w=v; ", "${!w}"),
        (f"v={name.upper()}; ", "${v,,}"), ("", f"$(echo {name})"),
        (f"set -- {name}; ", '"$1"'), (f"v={name}; ", "${v@Q}"),
    ]  # fmt: skip


_WRAPPERS = [
    "", "command ", "command -p ", "exec -a x ", "nice ", "nice -n 5 ", "timeout 5 ", "nohup ",
    "env ", "env -i ", "env A=1 ", "time ", "time -p ", "stdbuf -o0 ", "setsid -w ", "! ",
    "/usr/bin/env ", "A=1 ", "PATH=/usr/bin ", "builtin ", "exec ", "coproc ", "nice timeout 5 ",
    "env -- ", "command -- ", "timeout -s KILL 5 ", "env -u X ", ">work/o ", "{fd}>work/o ",
    "time >work/o ", "! 2>/dev/null ", "A=1 >work/o B=2 ",
]  # fmt: skip


@st.composite
def simple(draw: st.DrawFn, name: str) -> str:
    """A simple command that runs `name` with its argument, spelled and wrapped at random."""
    arg = COMMANDS[name]
    kind = draw(st.integers(0, 9))
    if kind == 0:
        special = [
            f"env -S{q(f'{name} {arg}')}", f"env --split-string={q(f'{name} {arg}')}",
            f"echo {arg} | xargs {name}", f"{name}${{IFS}}{arg}", f"{{{name},{arg}}}",
            f"hash -p /usr/bin/{name} zz; zz {arg}", f"find work -name t -exec {name} {arg} \\;",
            f"shopt -s expand_aliases\nalias zz={q(name)}\nzz {arg}", f"(exec {name} {arg})",
            f"coproc {name} {arg}\nwait", f"printf '%s\\n' {arg} | xargs -I{{}} {name} {{}}",
            f"f() {{ {name} \"$@\"; }}; f {arg}", f"{name}() {{ command {name} \"$@\"; }}; {name} {arg}",
            f"BASH_CMDS[zz]=/usr/bin/{name}; zz {arg}", f"x={name}; \"${{x}}\" {arg}",
        ]  # fmt: skip
        return draw(st.sampled_from(special))
    before, word = draw(st.sampled_from(_spellings(name)))
    wrapper = draw(st.sampled_from(_WRAPPERS))
    if wrapper == "builtin " and name != "echo":
        wrapper = ""
    tail = "\nwait" if wrapper == "coproc " else ""
    if wrapper == "exec ":
        return f"{before}({wrapper}{word} {arg})"
    return f"{before}{wrapper}{word} {arg}{tail}"


def _code_forms(code: str) -> list[str]:
    """Constructs that run `code` (shell text) when bash evaluates something."""
    sub = f"a[$({code})]"
    return [
        f"eval {q(code)}", f"bash -c {q(code)}", f"sh -c {q(code)}", f"trap {q(code)} EXIT",
        f"source /dev/stdin <<< {q(code)}", f". /dev/stdin <<< {q(code)}", f"bash <<< {q(code)}",
        f"bash <<'E'\n{code}\nE", f"mapfile -C {q(code + ' #')} -c 1 <<< x",
        f"compgen -C {q(code)} x", f"compgen -W {q('$(' + code + ')')} x",
        f"x={q('$(' + code + ')')}; echo ${{x@P}}", f"x={q(sub)}; echo $((x))",
        f"x={q(sub)}; echo $[x+1]", f"x={q(sub)}; let y=x", f"x={q(sub)}; ((y=x))",
        f"declare -i n; n={q(sub)}", f"local_x={q(sub)}; declare -i n=local_x",
        f"read {q(sub)} <<< 1", f"printf -v {q(sub)} 1", f"test -v {q(sub)}",
        f"[ -v {q(sub)} ]", f"[[ -v {sub} ]]", f"x={q(sub)}; [[ $x -eq 1 ]]",
        f"x={q(sub)}; [[ x -lt 2 ]]", f"x={q(sub)}; echo ${{a[x]}}", f"x={q(sub)}; b=([x]=1)",
        f"x={q(sub)}; a[x]=1", f"y={q(sub)}; echo ${{!y}}", f"PS4={q('$(' + code + ')')}; set -x; :",
        f"x={q(sub)}; for ((i=x; 0; )); do :; done", f"x={q(sub)}; echo \"${{@:x}}\"",
        f"declare {q(sub + '=1')}", f"x={q(sub)}; declare -a b=([x]=1)",
        f"read -r x <<< {q(sub)}; echo $((x))", f"set -- {q(sub)}; echo $(($1))",
        f"x={q(sub)}; echo $(( ${{x}} ))", f"echo $(( $(echo {q(sub)}) ))",
        f"f() {{ echo $(($1)); }}; f {q(sub)}", f"declare -n r=x; x={q(sub)}; echo $((r))",
        f"printf '%s\\n' {q(code)} | xargs -I{{}} bash -c {{}}", f"echo {q(code)} | bash",
        f"bash -c \"$(printf '%s' {q(code)})\"", f"find work -name t -exec sh -c {q(code)} \\;",
        f"/proc/self/exe -c {q(code)}", f"nice -n 1 bash -c {q(code)}",
        f"env -i PATH=/usr/bin bash -c {q(code)}", f"x={q(code)}; eval \"$x\"",
        f"f() {{ eval \"$1\"; }}; f {q(code)}", f"bash -s <<< {q(code)}",
        f"source <(printf '%s\\n' {q(code)})", f"x={q(code)}; bash <<< \"$x\"",
        f"bash -- /dev/stdin <<< {q(code)}", f"flock work/.lk -c {q(code)}",
        f"exec 3<<< {q(code)}; bash <&3", f"mapfile -t a <<< {q(code)}; eval \"${{a[0]}}\"",
    ]  # fmt: skip


def _structures(code: str) -> list[str]:
    """Constructs that run `code` directly."""
    return [
        f"( {code} )", f"{{ {code}\n}}", f"true && {code}", f"false || {code}",
        f"if true; then {code}\nfi", f"for i in 1; do {code}\ndone",
        f"while true; do {code}\nbreak; done", f"case a in a) {code}\n;; esac",
        f"f() {{ {code}\n}}; f", f"echo $({code})", f"echo `{code}`", f"cat <({code})",
        f"echo > >({code})", f"x=$({code}) true", f"echo ${{x:-$({code})}}", f"{code} | cat",
        f"cat <<E\n$({code})\nE", f"echo hi; {code}", f"[[ $({code}) ]]", f"{code} &\nwait",
        f"case $({code}) in *) ;; esac", f"exec 3> >({code}); echo hi", f"! {{ {code}\n}}",
        f"time {{ {code}\n}}", f"! ( {code} )", f"! {{ {{ {code}\n}}\n}}",
        f"! {{ if true; then {code}\nfi\n}}", f"time {{ ( {code} )\n}}", f"echo `echo \\`{code}\\``",
        f"echo \"`echo \\`{code}\\``\"",
    ]  # fmt: skip


_SOUP = [
    "echo", "hi", "rm", "work/t", "touch", "work/p", ";", "&&", "||", "|", "&", "\n", "#", "'",
    '"', "\\", "$", "(", ")", "{", "}", "<<E", "\nE\n", "$(", "`", "[[", "]]", "((", "))", "case",
    "in", "esac", ";;", "if", "then", "fi", "x=", "<", ">", "<<<", " ", " ", " ", "\\\n", "$'",
    '$"', "${", "!", "=", ",", "[", "]", "*", "?", "~", "-", "\t", "\r", "function", "do", "done",
]  # fmt: skip


@st.composite
def soup(draw: st.DrawFn) -> str:
    """Shell tokens strung together at random: where tree-sitter and bash may read differently."""
    return "".join(draw(st.lists(st.sampled_from(_SOUP), min_size=1, max_size=14)))


@st.composite
def candidates(draw: st.DrawFn) -> str:
    """A command: a program run through up to three random constructs, or token soup."""
    if draw(st.integers(0, 5)) == 0:
        return draw(soup())
    name = draw(st.sampled_from(["rm", "rm", "echo", "touch"]))
    command = draw(simple(name))
    for _ in range(draw(st.integers(0, 3))):
        forms = _code_forms(command) if draw(st.booleans()) else _structures(command)
        command = draw(st.sampled_from(forms))
    if draw(st.integers(0, 4)) == 0:
        command = f"echo hi; {command}"
    return command


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Oracle:
    return Oracle(tmp_path_factory.mktemp("oracle"))


def test_the_oracle_sees_every_way_to_reach_rm(oracle: Oracle) -> None:
    """Positive control: the real rm is unreachable and every route to it is recorded."""
    ran = oracle.run(
        "rm a; /bin/rm b; /usr/bin/rm c; command -p rm d; env rm e; (exec -a x rm f); "
        "hash -p /usr/bin/rm zz; zz g; find work -name t -exec rm {} +; ls work"
    )
    assert [c for c in ran.calls if c[0] == "rm"] == [
        ("rm", "a"), ("rm", "b"), ("rm", "c"), ("rm", "d"), ("rm", "e"), ("rm", "f"),
        ("rm", "g"), ("rm", "work/t"),
    ]  # fmt: skip
    assert ("ls", "work") in ran.calls  # ls is a shim too: nothing of the host runs
    assert "target" not in ran.output


def test_the_engine_denies_what_the_oracle_sees_rm_run(oracle: Oracle) -> None:
    """Positive control for the check itself: a command that runs rm and is not denied fails."""
    ran = oracle.run("rm work/t")
    assert "rm" in ran.programs()
    assert violations("rm work/t", ran) == []
    assert violations("true", ran) != []  # `true` would be allowed or asked, yet rm ran


@pytest.mark.timeout(24 * 3600 if _PROFILE == "shell-deep" else 300)
@_SETTINGS
@given(command=candidates())
def test_no_construct_runs_a_denied_or_unallowed_program_past_the_engine(
    oracle: Oracle, command: str
) -> None:
    ran = oracle.run(command)
    assert violations(command, ran) == [], f"{command!r} ran {sorted(ran.programs())}"
