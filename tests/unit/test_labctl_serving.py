"""The lab image's serving layer (lab/infra/serving.py): bookworm's image carries sglang's files,
the stand-in and the model, trixie's none; what the layer copies is part of the recipe hash; the
venv's python3 wrapper replaces the venv's link, never the interpreter the link points at."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1].parent
sys.path.insert(0, str(REPO / "lab"))
from infra import image, serving  # noqa: E402


def test_only_bookworm_has_a_serving_layer():
    assert serving.wheels("bookworm") == ["sglang==0.5.23", "flashinfer-python==0.7.2"]
    assert serving.wheels("trixie") == [] and serving.inputs("trixie") == []
    assert serving.STANDIN_SOURCE in serving.inputs("bookworm")


def test_the_stand_in_is_part_of_bookworms_recipe_only(tmp_path, monkeypatch):
    standin = tmp_path / "sglang_server.py"
    standin.write_text("# one\n")
    monkeypatch.setattr(serving, "STANDIN_SOURCE", standin)
    monkeypatch.setattr(serving, "inputs", lambda c: [standin] if serving.wheels(c) else [])
    monkeypatch.setattr(image.paths, "REPO", tmp_path)
    before = {c: image.recipe_hash(c) for c in image.CODENAMES}
    standin.write_text("# two\n")
    after = {c: image.recipe_hash(c) for c in image.CODENAMES}
    assert after["bookworm"] != before["bookworm"] and after["trixie"] == before["trixie"]


class FakeBuild:
    """image._Build's surface, with chroot commands that make a venv as python3 -m venv does."""

    def __init__(self, root, outside):
        self.root, self.codename, self.outside = root, "bookworm", outside

    def step(self, text):
        pass

    def chroot(self, *argv):
        if argv[:3] == ("python3", "-m", "venv"):
            bin_dir = self.root / argv[3].lstrip("/") / "bin"
            bin_dir.mkdir(parents=True)
            (bin_dir / "python3").symlink_to(self.outside)  # absolute, as venv makes it
            (bin_dir / "python3.11").symlink_to("python3")
            (bin_dir / "python").symlink_to("python3")
        else:  # pip install: the package files
            (self.root / serving.VENV.lstrip("/") / "lib/python3.11/site-packages/sglang").mkdir(parents=True)

    def write(self, path, text, mode=0o644):
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)


def test_install_writes_the_wrapper_in_place_of_the_venvs_link(tmp_path, monkeypatch):
    interpreter = tmp_path / "interpreter"
    interpreter.write_text("the build machine's python3\n")
    monkeypatch.setattr(serving, "download", lambda pins: None)
    monkeypatch.setattr(serving, "WHEELS", tmp_path / "wheels")
    (tmp_path / "wheels").mkdir()
    b = FakeBuild(tmp_path / "root", interpreter)
    serving.install(b)
    venv_bin = b.root / "opt/sglang/venv/bin"
    assert interpreter.read_text() == "the build machine's python3\n"
    assert not (venv_bin / "python3").is_symlink() and "sglang.launch_server" in (venv_bin / "python3").read_text()
    assert str((venv_bin / "python3.11").readlink()) == "/usr/bin/python3.11"
    site = b.root / "opt/sglang/venv/lib/python3.11/site-packages"
    assert "cuda: Optional[str] = '13.0'" in (site / "torch/version.py").read_text()
    assert (b.root / serving.STANDIN.lstrip("/")).read_text() == serving.STANDIN_SOURCE.read_text()
    model = b.root / serving.MODEL.lstrip("/")
    assert {p.name for p in model.iterdir()} >= {"config.json", "model.safetensors.index.json"}
