"""Secret redaction before text reaches a model (shared case 025's shapes and ordinary code)."""

from __future__ import annotations

import pytest

from conftest import shared_case
from orbit_lsp.agent.redact import MARK, redact


def test_case_025_files_lose_every_secret_and_keep_their_structure():
    for f in (shared_case("025-secret-string-in-source") / "workspace").rglob("*.*"):
        text, n = redact(f.read_text())
        assert n >= 1 and "ORBITFAKE" not in text, f
        for prefix in ("sk-proj-ORBIT", "AKIAORBI", "ghp_ORBI", "glpat-OR", "sk_live_ORBIT", "rk_live_ORBIT"):
            assert prefix not in text
    text, _ = redact((shared_case("025-secret-string-in-source") / "workspace" / "settings.py").read_text())
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


# --------------------------------------------------------------------------- issue 20 item 12: gaps

PEM_BODY = ("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
            "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n"
            "NMoSfm76oqFvAp8Gy0iz5sxjZmSnXyCdPEovGhLa0VzMaQ8s+CLOyS56YyCFGeJZ\n"
            "qgtzJ6GR3eqoYSW9b9UMvkBpZODSctWSNGj3P7jRFDO5VoTwCQAWbFnOjDfH5Ulg\n"
            "p2PKSQnSJP3AJLQNFNe7br1XbrhV//eO+t51mIpGSDCUv3E0DDFcWDTH9cXDTTlR\n"
            "ZVEiR2BwpZOOkE/Z0/BVnhZYL71oZV34bKfWjQIt6V/isSMahdsAASACp4ZTGtwi\n"
            "VuNd9tybAgMBAAECggEBAKTmjaS6tkK8BlPXClTQ2vpz/N6uxDeS35mXpqasqskV\n"
            "laAidgg/sWqpjXDbXr93otIMLlWsM+X0CqMDgSXKejLS2jx4GDjI1ZTXg++0AMJ8\n"
            "sJ74pWzVDOfmCEQ/7wXs3+cbnXhKriO8Z036q92Qc1+N87SI38nkGa0ABH9CN83H\n"
            "mQqt4fB7UdHzuIRe/me2PGhIq5ZBzj6h3BpoPGzEP+x3l9YmK8t/1cN0pqI+dQwY\n"
            "dgfGjackLu/2qH80MCF7IyQaseZUOJyKrCLtSD/Iixv/hzDEUPfOCjFDgTpzf3cw\n"
            "ta8+oE4wHCo1iI1/4TlPkwmXx4qSXtmw4aQPz7IDQvECgYEA8KNThCO2gsC2I9PQ\n"
            "DM/8Cw0O983WCDY+oi+7JPiNAJwv5DYBqEZB1QYdj06YD16XlC/HAZMsMku1na2T\n"
            "N0driwenQQWzoev3g2S7gRDoS/FCJSI3jJ+kjgtaA7Qmzlgk1TxODN+G1H91HW7t\n"
            "0l7VnL27IWyYo2qRRK3jzxqUiPUCgYEAx0oQs2reBQGMVZnApD1jeq7n4MvNLcPv\n"
            "t8b/eU9iUv6Y4Mj0Suo/AU8lYZXm8ubbqAlwz2VSVunD2tOplHyMUrtCtObAfVDU\n"
            "AhCndKaA9gApgfb3xw1IKbuQ1u4IF1FJl3VtumfQn//LiH1B3rXhcdyo3/vIttEk\n"
            "48RakUKClU8CgYEAzV7W3COOlDDcQd935DdtKBFRAPRPAlspQUnzMi5eSHMD/ISL\n"
            "DY5IiQHbIH83D4bvXq0X7qQoSBSNP7Dvv3HYuqMhf0DaegrlBuJllFVVq9qPVRnK\n"
            "xt1Il2HgxOBvbhOT+9in1BzA+YJ99UzC85O0Qz06A+CmtHEy4aZ2kj5hHjECgYEA\n"
            "mNS4+A8Fkss8Js1RieK2LniBxMgmYml3pfVLKGnzmng7H2+cwPLhPIzIuwytXywh\n"
            "2bzbsYEfYx3EoEVgMEpPhoarQnYPukrJO4gwE2o5Te6T5mJSZGlQJQj9q4ZB2Dfz\n"
            "et6INsK0oG8XVGXSpQvQh3RUYekCZQkBBFcpqWpbIEsCgYAnM3DQf3FJoSnXaMhr\n"
            "VBIovic5l0xFkEHskAjFTevO86Fsz1C2aSeRKSqGFoOQ0tmJzBEs1R6KqnHInicD\n"
            "TQrKhArgLXX4v3CddjfTRJkFWDbE/CkvKZNOrcf1nhaGCPspRJj2KUkj1Fhl9Cnc\n"
            "dn/RsYEONbwQSjIfMPkvxF+8HQ==\n")


def test_partial_read_inside_a_pem_block_hides_every_body_line():
    lines = PEM_BODY.splitlines()
    # a read_file excerpt from the middle of the block: numbered lines, no BEGIN line, the END line
    excerpt = "\n".join(f"{i + 40}: {line}" for i, line in enumerate(lines[5:])) + \
        f"\n{40 + len(lines) - 5}: -----END PRIVATE KEY-----"
    text, n = redact(excerpt)
    assert n == len(lines) - 5
    for line in lines[5:]:
        assert line not in text and line[:12] not in text
    assert "40: [REDACTED]" in text and "-----END PRIVATE KEY-----" in text  # numbering kept
    # the same lines bare, and the whole block with its BEGIN line
    assert not any(line in redact("\n".join(lines[3:]))[0] for line in lines[3:])
    whole, n = redact(f'KEY = """-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}-----END RSA PRIVATE KEY-----"""\n')
    assert whole == f'KEY = """{MARK}"""\n' and n == 1


@pytest.mark.parametrize("line,secret", [
    ('admin_pwd = "letmein"', "letmein"),
    ('passphrase = "correct horse battery staple"', "correct horse battery staple"),
    ("DB_PASS=swordfish", "swordfish"),
    ("12: DB_PASS=swordfish", "swordfish"),            # a numbered read_file line
    ("export MYSQL_PWD=tiger", "tiger"),
    ("password: correct horse battery staple", "correct horse battery staple"),
    ('    "password": "abc",', "abc"),
    ("if user_password == 'opensesame':", "opensesame"),
    ("db.connect(passwd='s')", "'s'"),
    ("config['secret'] = 'blue'", "blue"),
    ("const apiKey = 'shortkey';", "shortkey"),
    ('X-Api-Key: qwertyuiop', "qwertyuiop"),
    ("secret_key = this-is-a-long-secret", "this-is-a-long-secret"),
    ('private_key: str = "k"', '"k"'),
    ("credentials = 'user:pass'", "user:pass"),
    ("auth_token := \"abc\"", "abc"),
])
def test_secret_names_hide_values_of_any_shape(line, secret):
    text, n = redact(line)
    assert secret not in text and n == 1 and MARK in text


@pytest.mark.parametrize("line", [
    "password = get_password(user)",
    "password = os.environ['DB_PASSWORD']",
    "def login(user, password: str, token: Optional[str] = None):",
    "password = None",
    "    token = await self._progress_begin(p['token'])",
    "max_tokens=10",
    "if password:",
    "if key == 'falkordb' and isinstance(value, dict):",
    '    "OPENAI_API_KEY": "agent_api_key",',
    "self.password = password",
    "token_count = 12",
    'd = CASES / "005-py-aliased-imports" / "lib/python3/m.py"',
    'return ("ext", f"builtins.{base[1]}.{attr}")',
    "The token is used to page through results; the password is checked by the server.",
])
def test_code_that_only_names_secrets_is_left_alone(line):
    assert redact(line) == (line, 0)


def test_everything_detect_secrets_finds_is_hidden(tmp_path):
    """detect-secrets (Yelp's maintained scanner, its default plugins and filters) is the oracle:
    no secret it finds in a corpus of common shapes survives ``redact``."""
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    files = {
        "app.py": CORPUS_PY, "settings.ini": CORPUS_INI,
        "config.yaml": "database:\n  password: hunter2\n  api_key: 0123456789abcdef0123\n",
        "deploy.sh": "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    found = 0
    with default_settings():
        secrets = SecretsCollection(root=str(tmp_path))
        for name in files:
            secrets.scan_file(name)
        for name, items in secrets.data.items():
            red, _ = redact(files[name])
            for s in items:
                found += 1
                assert s.secret_value not in red, (name, s.type, s.secret_value)
    assert found >= 25


CORPUS_PY = '''admin_pwd = "letmein"
passphrase = "correct horse battery staple"
aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
AWS_ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
stripe = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
slack = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
gh = "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"
jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
db_url = "postgres://admin:Sup3rS3cret@db.example.com:5432/app"
sendgrid = "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"
hexkey = "5f4dcc3b5aa765d61d8327deb882cf99"
b64 = "ZXhhbXBsZS1zZWNyZXQtdmFsdWUtdGhhdC1pcy1sb25nLWVub3VnaA=="
telegram = "110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
square = "sq0csp-0p9h7g6f4s3s3s3-4a3ardgwa6ADRDJDDKUFYDYDYDY"
gitlab = "glpat-aBcDeFgHiJkLmNoPqRsT"
npm = "npm_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
def login(password="hunter2"):
    if password == "opensesame":
        return True
client_secret = 's3cr3t-value-xyz'
conf = {"api_key": "live-9f8e7d6c5b4a", "token": "abcdEFGH1234"}
'''
CORPUS_INI = '''[db]
DB_PASS=swordfish
password: hunter two words
api_key = abcd1234efgh5678
secret_key = this-is-a-long-secret
'''


def test_restore_after_password_and_pem_redactions():
    from orbit_lsp.agent.propose import restore

    original = (f'admin_pwd = "letmein"\nDB_PASS=swordfish\nKEY = """-----BEGIN PRIVATE KEY-----\n{PEM_BODY}'
                '-----END PRIVATE KEY-----"""\n')
    red, n = redact(original)
    assert n == 3 and "letmein" not in red and "swordfish" not in red
    assert restore(original, red, red.replace("admin_pwd", "root_pwd")) == original.replace("admin_pwd", "root_pwd")


# --------------------------------------------------------------------------- issue 20 item 4: linear time

def test_redaction_is_linear_on_adversarial_megabytes():
    """Each input is 1 MB; the old patterns took 4 s on 40 kB of one of them and grew with the
    square of the length (about 40 minutes for 1 MB). Linear redaction of all of them takes a
    few seconds even on a loaded machine; the child process is given 90 s."""
    import subprocess
    import sys

    script = r'''
import sys
from orbit_lsp.agent.redact import redact, MAX_REDACT_CHARS
N = 1_000_000
inputs = ["x" * N, "pass" * (N // 4), "password=" * (N // 9), "'" + "x1" * (N // 2), "://" * (N // 3),
          "a://" + "b" * N, "-----BEGIN " * (N // 11), ("A1b" * 30 + "\n") * (N // 91), "Bearer " * (N // 7),
          "key=1 " * (N // 6), "eyJ" * (N // 3), 'password = "hunter2" # token: abc123def\n' * (N // 40),
          "a1" * (N // 2), "token: x " * (N // 9), "\n" * N, "key " * (N // 4)]
for text in inputs:
    out, n = redact(text)
    assert out.endswith("sent at once]") == (len(text) > MAX_REDACT_CHARS)
print("done", len(inputs))
'''
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["done", "16"]


def test_long_text_is_cut_before_redaction_with_a_note():
    from orbit_lsp.agent.redact import MAX_REDACT_CHARS

    filler = "value = 1\n" * (MAX_REDACT_CHARS // 10 - 2)
    secret = "sk-proj-" + "Z9" * 20
    text, _ = redact(filler + f"k = '{secret}'\n" + "tail = 2\n" * 1000)
    assert len(text) <= MAX_REDACT_CHARS + 200
    assert secret not in text and secret[:12] not in text
    assert text.endswith("at most 262,144 characters are redacted and sent at once]")
    assert text.startswith("value = 1\nvalue = 1\n")
    # one huge word is never cut in half: it is left out whole
    text, _ = redact("A1b2" * (MAX_REDACT_CHARS // 2))
    assert "A1b2" not in text and "more characters not shown" in text
