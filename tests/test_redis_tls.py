"""``rediss://`` (issue 29): named as such in every message, password left out, and a
TLS URL naming a plain Redis fails at start-up in one line, its handshake bounded
(history/redis_tls.py) instead of a minute of retried read timeouts. The real test
redis-server (no TLS) behind a rediss:// URL."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from scrapy_recrawl.history.redis_tls import HANDSHAKE_SECONDS
from scrapy_recrawl.redis_settings import redis_from_settings, redis_location

from .cli_project import make_project, scrapy


def test_a_rediss_url_is_named_rediss_without_its_password():
    url = "rediss://:secret@127.0.0.1:6390/2"
    client, where = redis_from_settings(Settings({"REDIS_URL": url}))
    client.close()
    assert where == "rediss://127.0.0.1:6390/2"
    assert redis_location(Settings({"REDIS_URL": url})) == where
    # host and port with ssl=True in REDIS_PARAMS: TLS too
    settings = Settings(
        {"REDIS_HOST": "127.0.0.1", "REDIS_PORT": 6391, "REDIS_PARAMS": {"ssl": True}}
    )
    client, where = redis_from_settings(settings)
    client.close()
    assert where == "rediss://127.0.0.1:6391/0"
    assert redis_location(Settings({"REDIS_URL": url.replace("rediss", "redis")})).startswith(
        "redis://127.0.0.1:6390"
    )


@pytest.mark.slow  # a real `scrapy crawl` that waits out the 10 s handshake bound
def test_rediss_to_a_plain_redis_fails_in_one_line_naming_it(redis_server, tmp_path):
    url = redis_server.url.replace("redis://", "rediss://:secret@")
    where = redis_server.url.replace("redis://", "rediss://")
    project = make_project(
        tmp_path,
        f'SCHEDULER = "scrapy_recrawl.RedisRecrawlScheduler"\nREDIS_URL = {url!r}\n',
    )
    run = scrapy(project, "crawl", "pages")
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr and "secret" not in run.stderr
    said = [line for line in run.lines if "TLS handshake" in line]
    assert len(said) == 1, run.stderr
    assert where in said[0] or where.rsplit("/", 1)[0] in said[0], said[0]
    assert f"within {HANDSHAKE_SECONDS:g} s" in said[0] and "redis://" in said[0]
