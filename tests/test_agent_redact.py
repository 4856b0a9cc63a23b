"""Secret redaction before text reaches a model (shared case 025's shapes and ordinary code)."""

from __future__ import annotations

import pytest

from conftest import CASES
from orbit_lsp.agent.redact import MARK, redact


def test_case_025_files_lose_every_secret_and_keep_their_structure():
    for f in (CASES / "025-secret-string-in-source" / "workspace").rglob("*.*"):
        text, n = redact(f.read_text())
        assert n >= 1 and "ORBITFAKE" not in text, f
        for prefix in ("sk-proj-ORBIT", "AKIAORBI", "ghp_ORBI", "glpat-OR", "sk_live_ORBIT", "rk_live_ORBIT"):
            assert prefix not in text
    text, _ = redact((CASES / "025-secret-string-in-source" / "workspace" / "settings.py").read_text())
    assert "def connect(token=" in text and 'OPENAI_API_KEY = "[REDACTED]"' in text
    assert "-----BEGIN" not in text and "hunter2" not in text


@pytest.mark.parametrize("secret", [
    "sk-abcdefghijklmnop1234", "AKIAABCDEFGHIJKLMNOP", "xoxb-1234-5678-abcdefgh", "ghp_abcdefghijklmnop1234",
    "github_pat_abcdefghijklmnop1234", "glpat-abcdefghijkl1234", "AIzaSyA1234567890abcdefghijklmn",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig",
])
def test_token_shapes(secret):
    text, n = redact(f"x = call({secret!r})\nlog({secret})")
    assert secret not in text and n >= 2


def test_assignments_urls_and_prose():
    src = ('db = "postgres://app:p4ssw0rd@db:5432/x"\nAPI_TOKEN: str = "abc123xyz"\n'
           'conf = {"client_secret": "s3cr3t-value"}\nheaders["Authorization"] = "Bearer abcdef1234567890"\n'
           '# the password is hunter2x\nSTRIPE_KEY=abc123def456\n')
    text, _ = redact(src)
    for s in ("p4ssw0rd", "abc123xyz", "s3cr3t-value", "abcdef1234567890", "hunter2x", "abc123def456"):
        assert s not in text, s
    assert "postgres://app:[REDACTED]@db:5432/x" in text


def test_ordinary_code_is_left_alone():
    src = ('def tokenize(text, max_tokens=10):\n    """Split text; the token count is returned."""\n'
           '    token = next_token(text)\n    key = "name"\n    path = "orbit_lsp/graph/readonly.py"\n'
           '    return {"token": token, "keys": sorted(KEYS)}\n')
    text, n = redact(src)
    assert text == src and n == 0 and MARK not in text
