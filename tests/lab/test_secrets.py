"""No secret on a command line, in a log or in a readable file: a canary API key and HF token
go through site.yml and the benchmark at -vvv and through `infertune rollout -v`; afterwards
neither is in any output, any journal entry, any file on the host but the root-only secrets
file and the running server's root-only config file, nor in any process command line seen on the host or the control node meanwhile."""
import subprocess
import threading

import pytest
import yaml

from helpers import BIN, ROOT, labctl, on_host, playbook

pytestmark = pytest.mark.lab

HOST = "lab-gpu-07"
KEY, TOKEN = "canary-key-7f3a9e", "canary-token-5d21c4"


class CommandLines:
    """Samples every process command line on the host and the control node until stopped."""

    def __init__(self):
        self.seen, self._stop = set(), threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        while not self._stop.wait(1):
            local = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
            remote = labctl("exec", HOST, "--", "ps", "-eo", "args")
            self.seen |= {line for line in (local + remote).splitlines() if KEY in line or TOKEN in line}

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def secrets(lab, tmp_path_factory):
    path = tmp_path_factory.mktemp("vault") / "secrets.yml"
    path.write_text(yaml.safe_dump({"sglang_api_key": KEY, "sglang_secret_environment": {"HF_TOKEN": TOKEN}}))
    path.chmod(0o600)
    return path


def test_canary_secrets_leak_nowhere(secrets):
    with CommandLines() as lines:
        rc, site = playbook("site.yml", "--limit", HOST, "-e", f"@{secrets}", "-vvv")
        assert rc == 0, site[-6000:]
        rc, bench = playbook("playbooks/benchmark.yml", "--limit", HOST, "-e", f"@{secrets}", "-vvv",
                             "-e", '{"benchmark_backends": ["flashinfer_cutlass"]}')
        assert rc == 0, bench[-6000:]
        runner = subprocess.run([str(BIN / "infertune"), "rollout", "-v", "--limit", HOST, "-e", f"@{secrets}"],
                                cwd=ROOT, capture_output=True, text=True, check=False)
        assert runner.returncode == 0, runner.stdout[-4000:] + runner.stderr[-2000:]
    assert not lines.seen
    for output in (site, bench, runner.stdout + runner.stderr):
        assert KEY not in output and TOKEN not in output
    journal = on_host(HOST, "journalctl --no-pager -o cat")
    assert KEY not in journal and TOKEN not in journal
    found = on_host(HOST, f"grep -rlsF -e {KEY} -e {TOKEN} /etc /usr /var /run /root /home /tmp /opt || true")
    # The lab serves: the launch script's config file for the running server, in its
    # root-only RuntimeDirectory, holds the key too (removed when the server stops).
    assert found.split() == ["/etc/sglang/secrets.env", "/run/sglang/secret-args.yaml"]
    assert on_host(HOST, "stat -c '%a %U' /etc/sglang/secrets.env /run/sglang/secret-args.yaml /run/sglang"
                   ).split() == ["600", "root", "600", "root", "700", "root"]
    # The next run without the secrets takes them out again.
    rc, out = playbook("site.yml", "--limit", HOST)
    assert rc == 0, out[-4000:]
    assert on_host(HOST, f"grep -rlsF -e {KEY} -e {TOKEN} /etc /usr /var /run || true").strip() == ""
