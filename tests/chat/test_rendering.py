from __future__ import annotations

from skills_app.chat.rendering import markdown_html


def test_it_renders_commonmark_with_tables():
    html = markdown_html("# Title\n\n| a | b |\n|---|:-:|\n| 1 | 2 |\n")
    assert "<h1>Title</h1>" in html
    assert "<table>" in html
    assert '<td style="text-align:center">2</td>' in html


def test_it_escapes_raw_html_instead_of_passing_it():
    html = markdown_html('<script>alert(1)</script>\n\n<img src=x onerror="alert(2)">')
    assert "<script" not in html
    assert "<img" not in html
    assert "&lt;script&gt;" in html


def test_it_highlights_fenced_code_with_pygments():
    html = markdown_html("```python\ndef f():\n    return 1\n```")
    assert '<code class="language-python">' in html
    assert '<span class="k">def</span>' in html


def test_it_escapes_code_in_an_unknown_language():
    html = markdown_html("```nosuchlang\n<b>x</b>\n```")
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert "<b>" not in html


def test_it_makes_links_safe():
    html = markdown_html("[site](https://example.com)")
    assert 'href="https://example.com"' in html
    assert 'rel="noopener noreferrer nofollow"' in html


def test_it_drops_javascript_urls():
    html = markdown_html("[x](javascript:alert(1)) ![i](javascript:alert(2))")
    assert 'href="javascript' not in html
    assert 'src="javascript' not in html


def test_it_drops_styles_other_than_table_alignment():
    html = markdown_html("| a |\n|:-|\n| 1 |")
    assert "text-align:left" in html
    assert "position" not in html
