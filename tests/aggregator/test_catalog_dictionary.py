"""The privacy dictionary: the static export (``ldp dictionary``, ``ldp lint --html``)
and the dashboard's ``/ui/dictionary``."""

from __future__ import annotations

import math
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aggregator.catalog.dictionary import guess_bound, render_page
from aggregator.catalog.lint import lint_file
from ldp_server.app import create_server_app
from ldp_server.cli import main
from ldp_server.demo import DEMO_REGISTRY
from ldp_store.registry_source import save_source

TODAY = date(2026, 12, 2)


def test_guess_bound() -> None:
    assert guess_bound(0.0) == 0.5
    assert guess_bound(1.0) == pytest.approx(math.e / (1 + math.e))


def test_the_page_shows_every_metric_with_its_share_owner_expiry_and_plain_words() -> None:
    page = render_page(lint_file(str(DEMO_REGISTRY), TODAY))
    for name, owner, share in [
        ("app.theme", "ui-team@example.org", "1 (12% of budget)"),
        ("feature.first_used", "product@example.org", "4 (50% of budget)"),
    ]:
        article = page.split(f'<article class="metric" id="{name}">')[1].split("</article>")[0]
        assert owner in article and "2027-06-30" in article and share in article
        assert "What one report can reveal" in article and "cannot reveal" in article
    assert "at most 73%" in page  # ε = 1: e/(1+e)
    assert 'data-ok="true"' in page and "Thm 3.16" in page
    assert "<script" not in page  # a static page: nothing runs, nothing is loaded


def test_the_page_escapes_what_the_registry_says(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(
        '[metrics."a.b"]\ndomain = ["<b>x</b>", "y"]\nepsilon = 1.0\n'
        'description = "<script>alert(1)</script>"\n'
    )
    page = render_page(lint_file(str(path), TODAY))
    assert "<script>alert" not in page and "&lt;script&gt;" in page and "&lt;b&gt;" in page
    assert 'data-ok="false"' in page  # missing owner etc.: not ready for review


def test_ldp_dictionary_and_lint_html_write_the_page(tmp_path: Path) -> None:
    out = tmp_path / "d.html"
    ran = CliRunner().invoke(main, ["dictionary", str(DEMO_REGISTRY), "-o", str(out)])
    assert ran.exit_code == 0, ran.output
    assert "app.theme" in out.read_text()
    other = tmp_path / "e.html"
    ran = CliRunner().invoke(main, ["lint", str(DEMO_REGISTRY), "-q", "--html", str(other)])
    assert ran.exit_code == 0 and other.read_text() == out.read_text()


def test_the_dashboard_shows_the_applied_registry(redis_db: Any) -> None:
    app = create_server_app({"REDIS_URL": redis_db.url, "TESTING": True})
    client = app.test_client()
    empty = client.get("/ui/dictionary")
    assert empty.status_code == 200 and b'id="no-registry"' in empty.data
    save_source(redis_db.client(), DEMO_REGISTRY.name, DEMO_REGISTRY.read_text())
    page = client.get("/ui/dictionary")
    assert page.status_code == 200
    assert b'<article class="metric" id="user.country">' in page.data
    assert b"growth@example.org" in page.data
