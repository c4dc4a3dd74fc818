"""Environment variables a caller may add to a command, and how `skill_run` shows them to rules.

Bash and the programs it starts read many variables as code or as where to load code from:
`BASH_ENV`/`ENV` (a script bash sources before the command), `PS4` with `SHELLOPTS=xtrace`,
`PROMPT_COMMAND`, `IFS`, `LD_PRELOAD`, `PYTHONPATH`/`PYTHONSTARTUP`/`PYTHONWARNINGS`, `PERL5OPT`,
`RUBYOPT`, `NODE_OPTIONS`, `GIT_SSH_COMMAND`/`GIT_CONFIG_*`, `GCONV_PATH`, `GLIBC_TUNABLES`,
`LESSOPEN`, `JAVA_TOOL_OPTIONS`... A variable supplied by the model therefore must:

- be a plain name (`[A-Z_][A-Z0-9_]*`; lower case and `BASH_FUNC_x%%` exported functions are out);
- not be one of the names or prefixes below (code loaders, shell behaviour, the locale, and the
  names the server sets itself: PATH, HOME, TMPDIR, WORK_DIR, SKILL_DIR...);
- hold a value without NUL, within the size caps.

What is left (SOURCE_LANG=de, MAX_ROWS=10) cannot make bash or a common interpreter run code on
its own; what a skill's own script does with it is the script's business, which the approval
prompt shows: `command_with_env` writes the call as `NAME=value ... command`, so the prompt, the
audit and the permission rules all see the environment (a rule `Bash(python3 *)` does not allow
`MODE=x python3 ...`; deny rules still match the command after the assignments).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from skills_app.core.tools.base import ToolError

MAX_NAMES = 32
MAX_VALUE_CHARS = 4096
MAX_TOTAL_CHARS = 32_768
_PLAIN_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
# Read as code, or as where code comes from, by bash, the dynamic loader or an interpreter.
_DANGEROUS = frozenset(
    {
        "BASH_ENV", "ENV", "IFS", "PS1", "PS2", "PS3", "PS4", "SHELLOPTS", "BASHOPTS",
        "PROMPT_COMMAND", "CDPATH", "GLOBIGNORE", "SHELL", "TERMINFO", "HOSTALIASES", "LOCPATH",
        "NLSPATH", "GCONV_PATH", "RESOLV_HOST_CONF", "EDITOR", "VISUAL", "PAGER", "MANPAGER",
        "BROWSER", "CLASSPATH", "TZDIR", "INPUTRC", "OLDPWD", "PWD", "PERLLIB", "HISTFILE",
    }
)  # fmt: skip
_DANGEROUS_PREFIXES = (
    "LD_", "PYTHON", "PERL5", "PERL_", "RUBY", "NODE_", "NPM_CONFIG_", "GIT_", "BASH_",
    "JAVA", "_JAVA", "JDK_", "GLIBC_", "MALLOC_", "LESS", "SSH_", "PIP_", "GEM_", "BUNDLE_",
)  # fmt: skip
# Set by the server for every command; a caller may not replace them.
_RESERVED = frozenset(
    {
        "PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TMPDIR", "WORK_DIR", "OUTPUT_DIR",
        "SKILLS_DIR", "SKILL_DIR", "SKILL_NAME", "WORKSPACE_DIR", "RUN_DIR",
    }
)  # fmt: skip
_RESERVED_PREFIXES = ("LC_", "SKILLSCOPE_")


# Git settings forced from the command line (GIT_CONFIG_COUNT), which wins over a repository's
# own .git/config: each of these runs a command or a hook that the command line does not show.
_GIT_FORCED = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.sshCommand", "ssh"),
    ("core.editor", "false"),
    ("core.askPass", ""),
    ("sequence.editor", "false"),
    ("credential.helper", ""),
    ("gpg.program", "gpg"),
    ("protocol.ext.allow", "never"),
    ("safe.bareRepository", "explicit"),
)


def program_switches(home: str) -> dict[str, str]:
    """Variables that stop the programs a command runs from obeying files in the workspace.

    With `$HOME` a fresh empty folder outside the workspace (`home`), no start-up or
    configuration file the model wrote is read from there (`.gitconfig`, `.profile`, `.curlrc`,
    `.lesskey`, `~/.local` site-packages, `~/.node_modules`); these cover the rest: system and
    global git configuration, a repository's command-running settings, Python's user site,
    less's lesskey and input preprocessor, node's extra module folders, npm's and pip's
    configuration files. `core.permissions.steering` guards the files they still read (`.git/`,
    dotfiles at the root, `node_modules/`, `*.pth`, modules named like the standard library).
    """
    env = {
        "HOME": home,
        "XDG_CONFIG_HOME": f"{home}/.config",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_COUNT": str(len(_GIT_FORCED)),
        "PYTHONNOUSERSITE": "1",
        "LESSSECURE": "1",
        "LESSKEYIN": "/dev/null",
        "LESSKEY": "/dev/null",
        "LESSHISTFILE": "-",
        "NODE_PATH": "",
        "NPM_CONFIG_USERCONFIG": "/dev/null",
        "NPM_CONFIG_GLOBALCONFIG": "/dev/null",
        "PIP_CONFIG_FILE": "/dev/null",
        "WGETRC": "/dev/null",
    }
    for i, (key, value) in enumerate(_GIT_FORCED):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def env_name_problem(name: str, *, server: bool = False) -> str | None:
    """Why `name` may not be passed to a command, or None; `server` allows the reserved names."""
    if not _PLAIN_NAME.fullmatch(name):
        return f"{name!r} is not a plain variable name (capital letters, digits and _)"
    if name in _DANGEROUS or name.startswith(_DANGEROUS_PREFIXES):
        return f"{name} changes how the shell or a program loads code"
    if not server and (name in _RESERVED or name.startswith(_RESERVED_PREFIXES)):
        return f"{name} is set by the server"
    return None


def check_extra_env(extra: Mapping[str, str], tool: str = "Bash") -> dict[str, str]:
    """The server-supplied extra environment, refusing code-loading names (defence in depth)."""
    out: dict[str, str] = {}
    for key, value in extra.items():
        why = env_name_problem(str(key), server=True)
        if why or "\x00" in str(value):
            raise ToolError(
                f"{tool}: invalid environment variable {key!r}: {why or 'the value holds a NUL'}."
            )
        out[str(key)] = str(value)
    return out


def skill_run_env(raw: object) -> dict[str, str]:
    """Validate the `env` of a skill_run call: an allow-listed mapping of names to short strings."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ToolError(
            f"skill_run: env must be an object of NAME: value pairs, not {type(raw).__name__}."
        )
    if len(raw) > MAX_NAMES:
        raise ToolError(
            f"skill_run: env has {len(raw)} variables; at most {MAX_NAMES} are allowed."
        )
    refused: list[str] = []
    out: dict[str, str] = {}
    total = 0
    for key, value in raw.items():
        why = env_name_problem(key) if isinstance(key, str) else f"{key!r} is not a name"
        if why:
            refused.append(why)
            continue
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            refused.append(f"{key} must be a string, not {type(value).__name__}")
            continue
        text = str(value)
        if "\x00" in text or len(text) > MAX_VALUE_CHARS:
            refused.append(f"{key} holds a NUL or more than {MAX_VALUE_CHARS} characters")
            continue
        total += len(key) + len(text)
        out[key] = text
    if refused:
        raise ToolError(
            "skill_run: these environment variables are not allowed: "
            + "; ".join(refused)
            + ". Pass plain settings (e.g. MODE=fast) and put anything else in a file or an "
            "argument."
        )
    if total > MAX_TOTAL_CHARS:
        raise ToolError(
            f"skill_run: env holds {total} characters (limit {MAX_TOTAL_CHARS}); pass large "
            "data in a file under work/ instead."
        )
    return out


def command_with_env(env: Mapping[str, str], command: str) -> str:
    """The call as a rule and the approval prompt see it: `NAME=value ... command`."""
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    return f"{assignments} {command}" if assignments else command
