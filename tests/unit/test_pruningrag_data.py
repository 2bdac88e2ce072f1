"""CRAG's official files read as they ship (Task 3, 50 pages: one tar.bz2 of several JSONL parts; Task 1/2, 5 pages:
bz2 JSONL), and so does RM3QA, the paper's release with Markdown pages; the validation portion PruningRAG reports
(`split` 0) is kept as the file is read (spec/pruningrag.md §3.1, §3.2, P5, P9)."""

from __future__ import annotations

import bz2
import io
import json
import tarfile

import pytest
from hydra.utils import instantiate

from hoprag.cost import Cost
from hoprag.data import QADataset, load_questions
from hoprag.data.records import DataFormatError
from hoprag.paths import data_root
from hoprag.sources import WebSource, web
from tests.fakes import HashEmbedder


def crag(i: int, split: int, pages: int = 50) -> dict:
    results = [{"page_name": f"page {j}", "page_url": f"https://example.org/{i}/{j}", "page_snippet": f"snippet {j}",
                "page_result": f"<html><body><p>body {j}</p></body></html>", "page_last_modified": ""}
               for j in range(pages)]  # fmt: skip
    return {"interaction_id": f"id{i}", "query_time": "03/05/2024, 23:18:31 PT", "domain": "movie",
            "question_type": "simple", "static_or_dynamic": "static", "query": f"question {i}?",
            "answer": f"answer {i}", "alt_ans": [], "split": split, "search_results": results}  # fmt: skip


def jsonl(records, tail: str = "") -> bytes:
    return ("".join(json.dumps(r) + "\n" for r in records) + tail).encode()


def write_tar(path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:bz2") as archive:
        folder = tarfile.TarInfo("crag_task_3_dev_v4")
        folder.type = tarfile.DIRTYPE
        archive.addfile(folder)
        for name, data in members.items():
            info = tarfile.TarInfo(f"crag_task_3_dev_v4/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


@pytest.fixture
def release(tmp_path):
    """Two JSONL parts (the second bz2-compressed inside the archive), a README, and a broken last line."""
    path = tmp_path / "crag" / "crag_task_3_dev_v4.tar.bz2"
    path.parent.mkdir()
    write_tar(path, {
        "README.md": b"not questions",
        "crag_task_3_dev_v4_0.jsonl": jsonl([crag(0, 1), crag(1, 0), crag(2, 1)]),
        "crag_task_3_dev_v4_1.jsonl.bz2": bz2.compress(jsonl([crag(3, 0), crag(4, 0)], tail="{broken\n")),
    })  # fmt: skip
    return path


def test_a_tar_release_reads_its_jsonl_parts_in_archive_order_with_their_50_pages(release):
    examples = load_questions(release, format="crag", limit=5)
    assert [ex.id for ex in examples] == ["id0", "id1", "id2", "id3", "id4"]
    assert len(examples[0].metadata["search_results"]) == 50 and examples[3].metadata["split"] == 0
    with pytest.raises(DataFormatError, match=r"crag_task_3_dev_v4\.tar\.bz2:crag_task_3_dev_v4/crag_task_3_dev_v4_1"
                                              r"\.jsonl\.bz2, line 3: invalid JSON"):  # fmt: skip
        load_questions(release, format="crag")


def test_where_keeps_the_validation_split_as_the_file_is_read_before_limit(release):
    data = QADataset("crag", "crag/crag_task_3_dev_v4.tar.bz2", format="crag", root=str(release.parents[1]),
                     where={"split": 0}, limit=3)  # fmt: skip
    assert [ex.id for ex in data] == ["id1", "id3", "id4"]  # stops before the broken line
    both = QADataset("crag", str(release), format="crag", where={"split": 0}, types=["comparison"], limit=1)
    with pytest.raises(DataFormatError):  # no question matches both: the whole file is read
        len(both)


def test_an_archive_without_jsonl_parts_holds_no_records(tmp_path):
    path = tmp_path / "empty.tar.bz2"
    write_tar(path, {"README.md": b"nothing"})
    with pytest.raises(DataFormatError, match="holds no records"):
        load_questions(path, format="crag")


# The official files as they ship, built here from the bundled sample's records (some moved to split 0), and
# loaded through the `pages` options' data settings (conf/pages/*.yaml) under a data root of their own.
SAMPLE = "crag/crag_task1_dev_10.jsonl.bz2"


@pytest.fixture(scope="module")
def sample_records() -> list[dict]:
    with bz2.open(data_root() / SAMPLE, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    return [{**r, "split": 0 if i % 3 == 0 else 1} for i, r in enumerate(records)]  # split 0: records 0, 3, 6, 9


def validation_ids(records: list[dict]) -> list[str]:
    return [r["interaction_id"] for r in records if r["split"] == 0]


def pages_data(compose_cfg, pages: str, root) -> QADataset:
    cfg = compose_cfg("eval", ["data=crag", f"+pages={pages}", f"paths.data_dir={root}"])
    return instantiate(cfg.data)


def test_task_3_in_its_official_layout_loads_through_the_50web_setting(compose_cfg, tmp_path, sample_records):
    # one bz2-compressed tar of plain JSONL parts in a folder named after the release
    parts = {f"crag_task_3_dev_v4_{k}.jsonl": jsonl(sample_records[k * 5 : (k + 1) * 5]) for k in range(2)}
    (tmp_path / "crag").mkdir()
    write_tar(tmp_path / "crag" / "crag_task_3_dev_v4.tar.bz2", parts)
    data = pages_data(compose_cfg, "50web", tmp_path)
    assert data.name == "crag_50" and [ex.id for ex in data] == validation_ids(sample_records)
    assert all(ex.metadata["split"] == 0 and len(ex.metadata["search_results"]) == 5 for ex in data)


def test_the_full_task_1_and_2_file_loads_through_the_5web_setting(compose_cfg, tmp_path, sample_records):
    (tmp_path / "crag").mkdir()
    with bz2.open(tmp_path / "crag" / "crag_task_1_and_2_dev_v4.jsonl.bz2", "wb") as f:
        f.write(jsonl(sample_records))
    data = pages_data(compose_cfg, "5web", tmp_path)
    assert [ex.id for ex in data] == validation_ids(sample_records)


def rm3qa(records: list[dict]) -> list[dict]:
    """RM3QA's shape: CRAG's fields with `alt_ans`, Markdown pages, and some answers as numbers."""
    out = []
    for i, r in enumerate(records):
        pages = [{**p, "page_result": f"# {p['page_name']}\n\nMarkdown body {j} of question {i}."}
                 for j, p in enumerate(r["search_results"])]  # fmt: skip
        out.append({key: value for key, value in r.items() if key != "alternative_answers"}
                   | {"alt_ans": [2019, "twenty"], "search_results": pages} | ({"answer": 7} if i == 0 else {}))  # fmt: skip
    return out


def test_rm3qa_pages_are_read_as_markdown_through_the_rm3qa_5web_setting(
    compose_cfg, tmp_path, sample_records, monkeypatch
):
    (tmp_path / "rm3qa").mkdir()
    with bz2.open(tmp_path / "rm3qa" / "RM3QA_5web.jsonl.bz2", "wb") as f:
        f.write(jsonl(rm3qa(sample_records)))
    cfg = compose_cfg("eval", ["data=crag", "+pages=rm3qa_5web", f"paths.data_dir={tmp_path}"])
    data = instantiate(cfg.data)
    assert [ex.id for ex in data] == validation_ids(sample_records)
    assert data.examples[0].answers == ["7", "2019", "twenty"]

    def no_conversion(page):
        raise AssertionError("converted")

    monkeypatch.setattr(web, "html_to_markdown", no_conversion)
    source = WebSource(HashEmbedder(), pages_format=cfg.web_pages.pages_format, cache=False)
    first = data.examples[0].metadata["search_results"][0]
    assert source.chunks([first])[0].text == first["page_result"]
    (kept,) = source.fetch(data.examples[:1], [Cost()])
    assert len(kept) == 3 and source.question_stats[0]["pages_without_content"] == 0


@pytest.mark.parametrize("container", ["jsonl", "tar"])
def test_rm3qa_50web_loads_whether_its_bz2_holds_jsonl_or_a_tar(compose_cfg, tmp_path, sample_records, container):
    path = tmp_path / "rm3qa" / "RM3QA_50web.bz2"  # the release's name: no .jsonl, no .tar
    path.parent.mkdir()
    if container == "tar":
        write_tar(path, {"RM3QA_50web.jsonl": jsonl(rm3qa(sample_records))})
    else:
        path.write_bytes(bz2.compress(jsonl(rm3qa(sample_records))))
    data = pages_data(compose_cfg, "rm3qa_50web", tmp_path)
    assert data.name == "rm3qa_50" and [ex.id for ex in data] == validation_ids(sample_records)


def test_a_tar_told_by_its_content_alone_still_needs_jsonl_parts(tmp_path):
    path = tmp_path / "RM3QA_50web.bz2"
    write_tar(path, {"README.md": b"nothing"})
    with pytest.raises(DataFormatError, match="holds no records"):
        load_questions(path, format="crag")
