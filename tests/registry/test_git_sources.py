"""Skills from Git: local bare repositories made with real git, never the network.

The attacks come first: URLs that reach places they must not, trees holding links, submodules,
Git's own names, oversized or inflating files, marketplace entries that leave the repository.
Then the sync itself: one version per commit that changes a skill, with the commit id; plugins
and marketplaces with their `plugin:name` namespacing; the command, the timer's `--due`, the
admin's button.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo

from skills_app.core.gitsource import GitSourceError, check_branch, check_location, check_subpath
from skills_app.models import (
    SkillPackage,
    SkillReview,
    SkillSource,
    SkillSourceSync,
    SkillVersion,
)
from skills_app.registry import sources
from tests.support.trigger_helpers import isolate_skills

pytestmark = pytest.mark.django_db

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
    "PATH": "/usr/bin:/bin",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, check=True
    ).stdout.strip()


def skill_md(name: str, description: str = "Does a thing when asked.", body: str = "Steps.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


class Remote:
    """A work repository and the bare repository it pushes to (the source's URL)."""

    def __init__(self, root: Path) -> None:
        self.work = root / "work"
        self.bare = root / "remote.git"
        self.work.mkdir(parents=True)
        git(self.work, "init", "-q", "-b", "main")
        git(root, "init", "-q", "--bare", "-b", "main", str(self.bare))
        git(self.work, "remote", "add", "origin", str(self.bare))

    def commit(self, files: dict[str, str | bytes], message: str = "change") -> str:
        for rel, content in files.items():
            target = self.work / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
        git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "-m", message)
        git(self.work, "push", "-q", "origin", "main")
        return git(self.work, "rev-parse", "HEAD")


@pytest.fixture
def remote(tmp_path, settings):
    isolate_skills(settings, tmp_path)
    settings.GIT_SOURCE_LOCAL_ROOTS = [tmp_path / "repos"]
    return Remote(tmp_path / "repos")


def source_for(remote: Remote, user, path: str = "", **extra) -> SkillSource:
    return SkillSource.objects.create(
        name="team", url=f"file://{remote.bare}", branch="main", path=path, created_by=user, **extra
    )


# -- attacks: where a source may point -------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc", "not under a folder allowed for local repositories"),
        ("/etc", "not under a folder allowed for local repositories"),
        ("ext::sh -c touch% /tmp/pwned", "ext:: transports are not allowed (ext:: runs a command)"),
        ("fd::17", "fd:: transports are not allowed"),
        ("ssh://git@example.com/o/r.git", "ssh: URLs are not allowed"),
        ("git@example.com:o/r.git", "URLs are not allowed"),
        ("git://example.com/o/r.git", "git: URLs are not allowed"),
        ("--upload-pack=touch /tmp/pwned", "looks like a command-line option"),
        ("http://example.com/o/r.git", "plain http:// is not allowed"),
        ("https://token:x@example.com/o/r.git", "the URL carries credentials"),
        ("https://127.0.0.1/o/r.git", "127.0.0.1, an internal address"),
        ("https://[::1]/o/r.git", "::1, an internal address"),
        ("https://169.254.169.254/latest/meta-data", "169.254.169.254, an internal address"),
        ("https://10.1.2.3/o/r.git", "an internal address"),
        ("https://metadata.internal.example/o.git", "192.168.4.4, an internal address"),
    ],
)
def test_a_source_url_that_reaches_where_it_must_not_is_refused(tmp_path, url, message):
    def resolver(host: str) -> list[str]:
        return ["192.168.4.4"] if host.endswith(".example") else [host.strip("[]")]

    with pytest.raises(GitSourceError) as caught:
        check_location(url, local_roots=[tmp_path], resolver=resolver)
    assert message in caught.value.message


def test_a_public_https_url_and_an_allowed_local_repository_are_accepted(tmp_path, remote):
    public = check_location("https://example.com/o/r.git", resolver=lambda h: ["93.184.215.14"])
    assert public.url == "https://example.com/o/r.git" and public.local is None
    local = check_location(f"file://{remote.bare}", local_roots=[tmp_path / "repos"])
    assert local.local == remote.bare.resolve()


def test_a_local_path_that_escapes_its_root_through_a_link_is_refused(tmp_path, remote):
    (tmp_path / "repos" / "sneaky").symlink_to("/etc")
    with pytest.raises(GitSourceError, match="not under a folder allowed"):
        check_location(str(tmp_path / "repos" / "sneaky"), local_roots=[tmp_path / "repos"])


@pytest.mark.parametrize("branch", ["", "-x", "a..b", "main.lock", "a b", "refs/../x", "a@{1}"])
def test_a_branch_name_git_would_refuse_or_read_as_an_option_is_refused(branch):
    with pytest.raises(GitSourceError, match="not a usable branch name"):
        check_branch(branch)


@pytest.mark.parametrize("path", ["../x", "skills/../../x", ".git/hooks", "a/.GIT", "a/\x01b"])
def test_a_path_outside_the_repository_or_into_git_is_refused(path):
    with pytest.raises(GitSourceError):
        check_subpath(path)


def test_a_source_with_a_bad_url_in_the_database_fails_without_fetching(remote, skill_manager):
    source = SkillSource.objects.create(name="x", url="ext::sh -c id", created_by=skill_manager)
    record = sources.sync_source(source)
    assert record.status == "failed" and "ext:: transports are not allowed" in record.message
    assert not SkillVersion.objects.exists()


# -- attacks: what the tree holds ------------------------------------------------------------------


def test_a_symlink_out_of_the_tree_is_refused(remote, skill_manager):
    remote.commit({"pdf/SKILL.md": skill_md("pdf")})
    (remote.work / "pdf" / "secrets").symlink_to("/etc/passwd")
    remote.commit({}, "link")
    record = sources.sync_source(source_for(remote, skill_manager, "pdf"))
    assert record.status == "failed"
    assert "secrets is a symbolic link" in record.message
    assert not SkillVersion.objects.exists()


def test_a_submodule_is_refused(remote, skill_manager):
    remote.commit({"pdf/SKILL.md": skill_md("pdf")})
    head = git(remote.work, "rev-parse", "HEAD")
    git(remote.work, "update-index", "--add", "--cacheinfo", f"160000,{head},pdf/vendor")
    git(remote.work, "commit", "-q", "-m", "submodule")
    git(remote.work, "push", "-q", "origin", "main")
    record = sources.sync_source(source_for(remote, skill_manager, "pdf"))
    assert record.status == "failed"
    assert (
        "vendor is a submodule (another repository); submodules are not fetched" in record.message
    )


def test_a_file_over_the_limit_is_refused_by_its_declared_size(remote, skill_manager, settings):
    """20 MB of zeros packs into a few KB: the size is read from the header, not by inflating."""
    settings.UPLOAD_MAX_FILE_BYTES = 1024 * 1024
    remote.commit(
        {"pdf/SKILL.md": skill_md("pdf"), "pdf/assets/big.bin": b"\0" * (20 * 1024 * 1024)}
    )
    record = sources.sync_source(source_for(remote, skill_manager, "pdf"))
    assert record.status == "failed"
    assert "assets/big.bin is 20,971,520 bytes, over the limit of 1,048,576" in record.message


def test_too_many_files_are_refused(remote, skill_manager, settings):
    settings.UPLOAD_MAX_FILES = 5
    remote.commit({"pdf/SKILL.md": skill_md("pdf"), **{f"pdf/r/{i}.md": "x" for i in range(6)}})
    record = sources.sync_source(source_for(remote, skill_manager, "pdf"))
    assert record.status == "failed" and "more than 5 files" in record.message


@pytest.mark.parametrize("name", [b".git", b".GIT", b".git.", b"git~1", b".gitmodules"])
def test_names_git_itself_uses_are_refused(remote, skill_manager, name):
    """Git will not commit such names; a crafted repository can hold them all the same."""
    remote.commit({"pdf/SKILL.md": skill_md("pdf")})
    repo = Repo(str(remote.bare))
    head = repo[repo.refs[b"refs/heads/main"]]
    hook = Blob.from_string(b"#!/bin/sh\necho owned\n")
    inner = Tree()
    inner.add(b"post-checkout", 0o100755, hook.id)
    root_tree = repo[head.tree]
    pdf_tree = repo[root_tree[b"pdf"][1]]
    crafted = Tree()
    for entry in pdf_tree.items():
        crafted.add(entry.path, entry.mode, entry.sha)
    crafted.add(name, 0o040000, inner.id)
    top = Tree()
    top.add(b"pdf", 0o040000, crafted.id)
    commit = Commit()
    commit.tree, commit.parents = top.id, [head.id]
    commit.author = commit.committer = b"Mallory <m@example.com>"
    commit.author_time = commit.commit_time = int(time.time())
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = b"crafted"
    for obj in (hook, inner, crafted, top, commit):
        repo.object_store.add_object(obj)
    repo.refs[b"refs/heads/main"] = commit.id
    record = sources.sync_source(source_for(remote, skill_manager, "pdf"))
    assert record.status == "failed"
    assert "names that Git itself uses" in record.message
    assert not SkillVersion.objects.exists()


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("../outside", "leaves the repository"),
        ("/etc", "is not a path inside the repository"),
        ("https://example.com/x", "is not a path inside the repository"),
        ("./.git", "points into Git's own data"),
        ("./plugins/missing", "is not in the repository"),
    ],
)
def test_a_marketplace_entry_that_leaves_the_repository_is_refused(
    remote, skill_manager, source, message
):
    market = {"name": "m", "plugins": [{"name": "alpha", "source": source}]}
    remote.commit(
        {
            ".claude-plugin/marketplace.json": json.dumps(market),
            "plugins/alpha/skills/one/SKILL.md": skill_md("one"),
        }
    )
    record = sources.sync_source(source_for(remote, skill_manager))
    assert record.status == "failed" and message in record.message
    assert not SkillVersion.objects.exists()


# -- the sync --------------------------------------------------------------------------------------


def test_each_commit_that_changes_a_skill_makes_one_version_with_its_commit(remote, skill_manager):
    first = remote.commit(
        {"skills/pdf/SKILL.md": skill_md("pdf"), "skills/csv/SKILL.md": skill_md("csv")}
    )
    source = source_for(remote, skill_manager, "skills")
    record = sources.sync_source(source)
    assert record.status == "ok", record.message
    assert record.commit == first
    assert {(v["skill"], v["version"]) for v in record.versions} == {("pdf", 1), ("csv", 1)}
    pdf = SkillPackage.objects.get(name="pdf", owner=None)
    v1 = pdf.versions.get(number=1)
    assert v1.source == source and v1.source_commit == first
    # A draft, like an upload: its review trail says where it came from.
    assert v1.review_status == SkillVersion.DRAFT and pdf.active_version is None
    uploaded = v1.reviews.get(action=SkillReview.UPLOADED)
    assert uploaded.origin == f"git {first[:12]}" and uploaded.actor == skill_manager

    again = sources.sync_source(source)
    assert again.status == "unchanged" and again.commit == first

    second = remote.commit({"skills/pdf/SKILL.md": skill_md("pdf", "Fills in PDF forms.")})
    third = sources.sync_source(source)
    assert third.status == "ok", third.message
    assert [(v["skill"], v["version"]) for v in third.versions] == [("pdf", 2)]
    assert "unchanged: csv" in third.message
    new = pdf.versions.get(number=2)
    assert new.source_commit == second and new.source_id == source.pk
    pdf.refresh_from_db()
    # A draft until it is reviewed: nothing went live.
    assert new.review_status == SkillVersion.DRAFT and pdf.active_version is None
    source.refresh_from_db()
    assert (source.last_commit, source.last_status) == (second, "ok")
    assert list(source.syncs.values_list("status", flat=True)) == ["ok", "unchanged", "ok"]


def test_a_skill_with_lint_errors_is_refused_and_the_others_still_sync(remote, skill_manager):
    remote.commit(
        {
            "skills/good/SKILL.md": skill_md("good"),
            "skills/bad/SKILL.md": "---\nname: bad\nname: bad\ndescription: twice\n---\nx\n",
        }
    )
    record = sources.sync_source(source_for(remote, skill_manager, "skills"))
    assert record.status == "partial"
    assert "refused: bad: bad has 1 lint error(s)" in record.message
    assert "duplicate-key" in record.message
    assert [v["skill"] for v in record.versions] == ["good"]


def test_a_marketplace_imports_its_plugins_skills_with_their_namespace(remote, skill_manager):
    market = {
        "name": "acme",
        "owner": {"name": "Acme"},
        "plugins": [
            {"name": "docs", "source": "./plugins/docs", "description": "Document skills"},
            {"name": "elsewhere", "source": {"source": "github", "repo": "acme/other"}},
        ],
    }
    commit = remote.commit(
        {
            ".claude-plugin/marketplace.json": json.dumps(market),
            "plugins/docs/.claude-plugin/plugin.json": json.dumps({"name": "docs"}),
            "plugins/docs/skills/pdf/SKILL.md": skill_md("pdf"),
            "plugins/docs/skills/xlsx/SKILL.md": skill_md("xlsx"),
            "plugins/docs/README.md": "not a skill",
        }
    )
    record = sources.sync_source(source_for(remote, skill_manager))
    assert record.status == "ok", record.message
    names = sorted(v["skill"] for v in record.versions)
    assert names == ["docs:pdf", "docs:xlsx"]
    assert "plugin elsewhere is hosted elsewhere (github)" in record.message
    version = SkillVersion.objects.get(package__name="docs:pdf")
    assert version.source_commit == commit


def test_an_agent_plugins_plugin_json_is_one_plugin(remote, skill_manager):
    manifest = {
        "$schema": "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json",
        "name": "greeter",
    }
    remote.commit(
        {
            "tools/plugin.json": json.dumps(manifest),
            "tools/skills/greet/SKILL.md": skill_md("greet"),
        }
    )
    record = sources.sync_source(source_for(remote, skill_manager, "tools"))
    assert [v["skill"] for v in record.versions] == ["greeter:greet"], record.message


def test_a_personal_source_makes_personal_skills(remote, alice):
    remote.commit({"mine/SKILL.md": skill_md("mine")})
    record = sources.sync_source(source_for(remote, alice, "mine", owner=alice))
    assert record.status == "ok", record.message
    assert SkillPackage.objects.get(name="mine").owner == alice


def test_a_missing_branch_names_the_ones_there_are(remote, skill_manager):
    remote.commit({"pdf/SKILL.md": skill_md("pdf")})
    source = source_for(remote, skill_manager, "pdf")
    source.branch = "release"
    source.save()
    record = sources.sync_source(source)
    assert record.status == "failed"
    assert "the repository has no branch 'release' (branches: main); pick one" in record.message


def test_one_source_is_never_synced_twice_at_once(remote, skill_manager):
    from django.utils import timezone

    remote.commit({"pdf/SKILL.md": skill_md("pdf")})
    source = source_for(remote, skill_manager, "pdf")
    SkillSource.objects.filter(pk=source.pk).update(sync_started_at=timezone.now())
    record = sources.sync_source(source)
    assert (
        record.status == "failed" and "another sync of this source is under way" in record.message
    )
    assert not SkillVersion.objects.exists()


def test_the_command_syncs_the_due_sources_and_fails_loudly(remote, skill_manager, capsys):
    remote.commit({"pdf/SKILL.md": skill_md("pdf")})
    due = source_for(remote, skill_manager, "pdf", sync_interval_minutes=30)
    manual = source_for(remote, skill_manager, "pdf", sync_interval_minutes=0)
    call_command("sync_skill_sources", "--due")
    assert due.syncs.count() == 1 and manual.syncs.count() == 0
    call_command("sync_skill_sources", "--due")  # synced just now: not due again
    assert due.syncs.count() == 1
    broken = SkillSource.objects.create(name="broken", url="ssh://x/y", created_by=skill_manager)
    with pytest.raises(CommandError, match="1 of 1 source"):
        call_command("sync_skill_sources", "--source", str(broken.pk))


def test_the_admins_button_syncs_and_reports(remote, skill_manager, alice):
    remote.commit({"pdf/SKILL.md": skill_md("pdf")})
    source = source_for(remote, skill_manager, "pdf")
    client = Client()
    client.force_login(skill_manager)
    page = client.get(f"/admin/skills_app/skillsource/{source.pk}/change/").content.decode()
    assert 'id="sync-now"' in page
    response = client.post(f"/admin/skills_app/skillsource/{source.pk}/sync/", follow=True)
    assert "new versions: pdf v1" in response.content.decode()
    assert SkillSourceSync.objects.get(source=source).started_by == skill_manager

    outsider = Client()
    outsider.force_login(alice)
    response = outsider.post(f"/admin/skills_app/skillsource/{source.pk}/sync/")
    assert response.status_code == 302 and "/login" in response["Location"]
    assert SkillSourceSync.objects.filter(source=source).count() == 1


def test_the_admin_form_refuses_a_bad_url_with_its_reason(skill_manager, tmp_path, settings):
    settings.GIT_SOURCE_LOCAL_ROOTS = []
    client = Client()
    client.force_login(skill_manager)
    response = client.post(
        "/admin/skills_app/skillsource/add/",
        {
            "name": "x",
            "url": "file:///etc",
            "branch": "main",
            "path": "",
            "enabled": "on",
            "sync_interval_minutes": "60",
            "syncs-TOTAL_FORMS": "0",
            "syncs-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200
    assert "local repositories are not allowed as sources" in response.content.decode()
    assert not SkillSource.objects.exists()


def test_a_marketplace_listing_skill_folders_of_the_repository_itself(remote, skill_manager):
    """The official marketplace's shape: plugins rooted at "./" that list their skill folders."""
    market = {
        "name": "examples",
        "plugins": [
            {"name": "docs", "source": "./", "strict": False, "skills": ["./skills/pdf"]},
            {
                "name": "extras",
                "source": "./",
                "strict": False,
                "skills": ["./skills/csv", "./skills/notes"],
            },
        ],
    }
    remote.commit(
        {
            ".claude-plugin/marketplace.json": json.dumps(market),
            "skills/pdf/SKILL.md": skill_md("pdf"),
            "skills/csv/SKILL.md": skill_md("csv"),
            "skills/notes/SKILL.md": skill_md("notes"),
            "README.md": "A collection.",
        }
    )
    # A link elsewhere in the repository is none of the skills' business.
    (remote.work / "docs").mkdir()
    (remote.work / "docs" / "passwd").symlink_to("/etc/passwd")
    remote.commit({}, "docs link")
    record = sources.sync_source(source_for(remote, skill_manager))
    assert record.status == "ok", record.message
    assert sorted(v["skill"] for v in record.versions) == ["docs:pdf", "extras:csv", "extras:notes"]


OFFICIAL = Path("/work/.mirror/anthropics+skills/repo")


@pytest.mark.skipif(
    not (OFFICIAL / "HEAD").is_file(),
    reason=f"no snapshot of github.com/anthropics/skills at {OFFICIAL} (a bare repository)",
)
def test_the_official_marketplace_syncs_as_its_plugins(settings, tmp_path, skill_manager):
    """The public anthropics/skills repository, read from a local snapshot as a Git source."""
    isolate_skills(settings, tmp_path)
    settings.GIT_SOURCE_LOCAL_ROOTS = [OFFICIAL.parent]
    branch = subprocess.run(
        ["git", f"--git-dir={OFFICIAL}", "symbolic-ref", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    source = SkillSource.objects.create(
        name="official", url=str(OFFICIAL), branch=branch, created_by=skill_manager
    )
    record = sources.sync_source(source)
    assert record.status in ("ok", "partial"), record.message
    names = {v["skill"] for v in record.versions}
    assert {"document-skills:pdf", "document-skills:xlsx", "example-skills:skill-creator"} <= names
    assert all(":" in n for n in names)


@pytest.fixture
def http_remote(remote):
    """The bare repository served over smart HTTP on loopback (dulwich's own WSGI server)."""
    import threading
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from dulwich.server import DictBackend
    from dulwich.web import make_wsgi_chain

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    app = make_wsgi_chain(DictBackend({"/skills.git": Repo(str(remote.bare))}))
    server = make_server("127.0.0.1", 0, app, handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/skills.git"
    finally:
        server.shutdown()


def test_a_source_over_http_syncs_when_the_operator_allows_it(
    remote, http_remote, skill_manager, settings
):
    commit = remote.commit({"pdf/SKILL.md": skill_md("pdf")})
    source = SkillSource.objects.create(
        name="web", url=http_remote, path="pdf", created_by=skill_manager
    )
    refused = sources.sync_source(source)
    assert refused.status == "failed" and "plain http:// is not allowed" in refused.message
    settings.GIT_SOURCE_ALLOW_HTTP = True
    refused = sources.sync_source(source)
    assert "127.0.0.1, an internal address" in refused.message
    settings.GIT_SOURCE_ALLOW_PRIVATE_HOSTS = True
    record = sources.sync_source(source)
    assert record.status == "ok", record.message
    assert record.commit == commit and [v["skill"] for v in record.versions] == ["pdf"]


def test_a_redirect_is_refused_not_followed(remote, http_remote, skill_manager, settings):
    """A public host could redirect to an internal one the URL check never saw: not followed."""
    import threading
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    def redirecting(environ, start_response):
        target = http_remote + environ["PATH_INFO"].removeprefix("/moved.git")
        query = environ.get("QUERY_STRING")
        start_response("302 Found", [("Location", target + (f"?{query}" if query else ""))])
        return [b""]

    server = make_server("127.0.0.1", 0, redirecting, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.GIT_SOURCE_ALLOW_HTTP = True
    settings.GIT_SOURCE_ALLOW_PRIVATE_HOSTS = True
    remote.commit({"pdf/SKILL.md": skill_md("pdf")})
    try:
        moved = SkillSource.objects.create(
            name="moved",
            url=f"http://127.0.0.1:{server.server_port}/moved.git",
            path="pdf",
            created_by=skill_manager,
        )
        refused = sources.sync_source(moved)
        assert refused.status == "failed"
        assert "redirects are not followed" in refused.message
        assert http_remote in refused.message  # it names where it was sent, to fix the URL
        # Positive control: the final address itself syncs.
        direct = SkillSource.objects.create(
            name="direct", url=http_remote, path="pdf", created_by=skill_manager
        )
        assert sources.sync_source(direct).status == "ok"
    finally:
        server.shutdown()
