"""The paper tables' data files at their official names, made from the bundled samples (the rehearsal's data).

`lay_out(data_root, shared)` writes under `data_root` every file a table reads at scale=paper, at the path it
reads (the official file names, `hoprag/data/fetch.py`'s layout): each dataset's bundled real sample in its
official format under the full file's name, the test fixtures where no sample is bundled (MultiHop-RAG, ASQA,
AmbigDocs), and wiki-18 as FlashRAG ships it (`retrieval-corpus/wiki18_100w.jsonl`, `{"id", "contents":
"\\"Title\\"\\ntext"}`, DPR's quoted titles) holding the bundled real wiki-18 passages plus every paragraph of
the three dev samples (so their gold passages can be found): a few thousand passages instead of 21 million.
2Wiki's `train.json` (what TreeHop's paper training reads) is the bundled 500-question train sample.
CRAG's Task 1/2 file holds the 10 bundled questions (all of split 1 in the sample): the first 5 with `split` set to
0, the validation portion the paper reports (the tables evaluate), the other 5 as they are, the router-training
portion the paper's router is labelled on; Task 3's archive (a tar.bz2 of JSONL parts, as released) holds the
same questions in two parts, 5 pages each instead of 50. Both are rewritten when a data root holds other
content (an older split), never otherwise. HippoRAG 2's NQ and PopQA subsets (`hipporag2/{nq,popqa}.json` and
their `*_corpus.json`) are not bundled: their four files stand in for the layout only, not NQ's or PopQA's content,
holding the first `HIPPORAG_QUESTIONS` bundled HotpotQA questions with their paragraphs (PopQA's answers as its
JSON string)."""

from __future__ import annotations

import bz2
import io
import json
import shutil
import tarfile
from pathlib import Path

from hoprag.data import QADataset, pool_corpus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WIKI18 = "retrieval-corpus/wiki18_100w.jsonl"
CRAG = "crag/crag_task_1_and_2_dev_v4.jsonl.bz2"
CRAG_TASK3 = "crag/crag_task_3_dev_v4.tar.bz2"
# official name -> the bundled file (under shared/data) or test fixture that holds real records in that format
COPIES = {
    "hotpotqa/hotpot_dev_distractor_v1.json": "hotpotqa/hotpot_dev_distractor_185.json",
    "hotpotqa/hotpot_dev_fullwiki_v1.json": "hotpotqa/hotpot_dev_distractor_185.json",  # the same JSON schema
    "2wikimultihopqa/dev.json": "2wikimultihopqa/dev_159.json",
    "2wikimultihopqa/train.json": "2wikimultihopqa/train_500.json",
    "musique/musique_ans_v1.0_dev.jsonl": "musique/musique_ans_dev_200.jsonl",
    "crag/company_name.dict": "crag/company_name.dict",
}
FIXTURE_COPIES = {
    "multihop_rag/MultiHopRAG.json": "multihop_rag/MultiHopRAG.json",
    "multihop_rag/corpus.json": "multihop_rag/corpus.json",
    "asqa/ASQA.json": "asqa/ASQA.json",
    "ambigdocs/test.json": "ambigdocs/test.json",
}
HIPPORAG_QUESTIONS = 20
VALIDATION = 5  # CRAG questions of split 0 (the rest are the router-training portion)
DEV_SAMPLES = {  # format -> the bundled dev sample
    "hotpotqa": "hotpotqa/hotpot_dev_distractor_185.json",
    "2wikimultihopqa": "2wikimultihopqa/dev_159.json",
    "musique": "musique/musique_ans_dev_200.jsonl",
}


def lay_out(data_root: Path, shared: Path) -> list[str]:
    """Write the rehearsal's data root (copies and wiki-18 already there are kept); the relative names written."""
    written = []
    for name, source in [*((n, shared / s) for n, s in COPIES.items()),
                         *((n, FIXTURES / s) for n, s in FIXTURE_COPIES.items())]:  # fmt: skip
        target = data_root / name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        written.append(name)
    with bz2.open(shared / "crag" / "crag_task1_dev_10.jsonl.bz2", "rt", encoding="utf-8") as f:
        lines = [json.dumps(_split(json.loads(line), i), ensure_ascii=False) + "\n"
                 for i, line in enumerate(line for line in f if line.strip())]  # fmt: skip
    crag, task3, text = data_root / CRAG, data_root / CRAG_TASK3, "".join(lines).encode("utf-8")
    if not (task3.is_file() and crag.is_file() and bz2.decompress(crag.read_bytes()) == text):
        _write(task3, _task3_archive(lines))  # the Task 1/2 file last: it tells that both are current
        _write(crag, bz2.compress(text))
    written += [CRAG, CRAG_TASK3]
    written += _hipporag_subsets(data_root, shared)
    corpus = data_root / WIKI18
    if not corpus.exists():
        corpus.parent.mkdir(parents=True, exist_ok=True)
        tmp = corpus.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            for record in _wiki18_records(shared):
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
        tmp.rename(corpus)
    return [*written, WIKI18]


def _split(record: dict, i: int) -> dict:
    """The first `VALIDATION` questions in the validation portion (split 0); the others keep their own split."""
    return {**record, "split": 0} if i < VALIDATION else record


def _task3_archive(lines: list[str]) -> bytes:
    """CRAG Task 3's release layout: a tar.bz2 of JSONL parts (here two)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:bz2") as tar:
        for part, chunk in enumerate((lines[: len(lines) // 2], lines[len(lines) // 2 :]), 1):
            data = "".join(chunk).encode("utf-8")
            member = tarfile.TarInfo(f"crag_task_3_dev_v4/crag_task_3_dev_v4_{part}.jsonl")
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _wiki18_records(shared: Path):
    """Real wiki-18 passages (the bundled Bamboogle sample's) then the dev samples' paragraphs, in wiki-18's
    form: a numeric id and a quoted title, as DPR's TSV has it."""
    seen: set[tuple[str, str]] = set()
    n = 0
    with open(shared / "bamboogle" / "wiki18_passages.jsonl", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            title, _, text = record["contents"].partition("\n")
            seen.add((title.strip('"'), text))
            n += 1
            yield {"id": str(n), "contents": f'"{title.strip(chr(34))}"\n{text}'}
    for fmt, file in DEV_SAMPLES.items():
        examples = QADataset(name=fmt, questions=str(shared / file), format=fmt).examples
        for p in pool_corpus(examples):
            if (p.title, p.text) in seen:
                continue
            seen.add((p.title, p.text))
            n += 1
            yield {"id": str(n), "contents": f'"{p.title.replace(chr(34), chr(34) * 2)}"\n{p.text}'}


def _hipporag_subsets(data_root: Path, shared: Path) -> list[str]:
    """HippoRAG 2's NQ and PopQA files in their layout, filled (no NQ or PopQA sample is bundled) with bundled
    HotpotQA questions: a stand-in for the layout, not NQ's or PopQA's content."""
    examples = QADataset(name="hotpotqa", questions=str(shared / DEV_SAMPLES["hotpotqa"]), format="hotpotqa",
                         limit=HIPPORAG_QUESTIONS).examples  # fmt: skip
    corpus = [{"title": p.title, "text": p.text} for p in pool_corpus(examples)]
    files = {"hipporag2/nq.json": [_hipporag_record(ex, {"answer": ex.answers}) for ex in examples],
             "hipporag2/popqa.json": [_hipporag_record(ex, {"id": i, "possible_answers": json.dumps(ex.answers)})
                                      for i, ex in enumerate(examples)],
             "hipporag2/nq_corpus.json": corpus, "hipporag2/popqa_corpus.json": corpus}  # fmt: skip
    for name, records in files.items():
        data = json.dumps(records, ensure_ascii=False, indent=1).encode("utf-8")
        if not ((data_root / name).is_file() and (data_root / name).read_bytes() == data):  # kept: its store stays
            _write(data_root / name, data)
    return list(files)


def _hipporag_record(example, answers: dict) -> dict:
    """One question as HippoRAG 2's subsets hold it: the answer fields, then its paragraphs marked supporting."""
    gold = set(example.supporting_titles)
    paragraphs = [{"title": p.title, "text": p.text, "is_supporting": p.title in gold} for p in example.context]
    return {**answers, "question": example.question, "paragraphs": paragraphs}
