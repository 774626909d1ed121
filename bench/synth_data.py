"""A full-size dataset (1,500 profiles, about 122,000 scenarios) synthesised from the bundled
50-profile sample's real files, for scale benchmarks without the upstream download.

    python bench/synth_data.py OUT_DIR [--profiles 1500]

Profiles of the sample keep their files; every other user N gets the files of a sample user
(round robin), with its own user id. The task catalogue is the real one. The result is in the
upstream layout: use it with --personalens-data OUT_DIR --sample all. The data stays under the
benchmark's CC BY-NC 4.0 licence: its NOTICE and LICENSE are copied along.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from personalens_testkit.data.loader import bundled_root


def synthesise(out: Path, profiles: int) -> int:
    source = bundled_root()
    if out.exists():
        shutil.rmtree(out)
    (out / "data" / "profile").mkdir(parents=True)
    shutil.copytree(source / "data" / "task", out / "data" / "task")
    for name in ("NOTICE.md", "LICENSE.md"):
        shutil.copy(source / name, out / name)
    if (source / "res").is_dir():
        shutil.copytree(source / "res", out / "res")
    sample = sorted((source / "data" / "profile").iterdir(), key=lambda p: int(p.name.removeprefix("user")))
    for number in range(1, profiles + 1):
        target = out / "data" / "profile" / f"user{number}"
        own = source / "data" / "profile" / f"user{number}"
        template = own if own.is_dir() else sample[number % len(sample)]
        shutil.copytree(template, target)
        if template is not own:
            profile = json.loads((target / "profile.json").read_text(encoding="utf-8"))
            profile["demographics"]["user_id"] = f"user{number}"
            (target / "profile.json").write_text(json.dumps(profile, ensure_ascii=False), encoding="utf-8")
    return profiles


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--profiles", type=int, default=1500)
    args = parser.parse_args()
    count = synthesise(args.out, args.profiles)
    print(f"synthesised {count} profiles in {args.out} (use --personalens-data {args.out} --sample all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
