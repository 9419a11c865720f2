"""Token counting must work with no network at all."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from engine.prompt.tokens import count_tokens, truncate_to_tokens


def test_counts_match_cl100k():
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    assert count_tokens("<|endoftext|>") > 1  # special tokens are counted as text, not refused


def test_truncation_keeps_the_end_or_the_start():
    text = "one two three four five six seven eight"
    assert truncate_to_tokens(text, 3) == " six seven eight"
    assert truncate_to_tokens(text, 2, keep="start") == "one two"
    assert truncate_to_tokens(text, 100) == text


def test_counting_works_with_the_network_unreachable(tmp_path):
    # A fresh process with an empty tiktoken cache, every socket connection refused, and
    # proxies pointing nowhere: the encoding must come from the installed package.
    script = textwrap.dedent(
        """
        import socket

        def refuse(*args, **kwargs):
            raise OSError("network is unreachable in this test")

        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse

        from engine.prompt.tokens import count_tokens
        print(count_tokens("The lantern gutters and goes out."))
        """
    )
    env = {
        "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache"),
        "DATA_GYM_CACHE_DIR": str(tmp_path / "empty-cache"),
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "PATH": "",
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == 8
