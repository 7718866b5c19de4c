"""Write the lab's model: tests/checkpoint.py's checkpoint plus the index a real one carries."""
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tests.checkpoint import write_checkpoint  # noqa: E402


def main(target):
    directory = Path(target)
    directory.mkdir(parents=True, exist_ok=True)
    write_checkpoint(directory)
    weight_map = {}
    for shard in sorted(directory.glob("*.safetensors")):
        raw = shard.read_bytes()
        header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
        weight_map.update({name: shard.name for name in header if name != "__metadata__"})
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


if __name__ == "__main__":
    main(sys.argv[1])
