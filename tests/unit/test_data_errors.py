"""Malformed files raise DataFormatError with file and line; missing files raise a helpful
FileNotFoundError or are fetched (downloaders monkeypatched: these tests never touch the network)."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import pytest

from hoprag.data import DataFormatError, QADataset, fetch, load_nli, load_questions, read_corpus

MUSIQUE_LINE = {
    "id": "2hop__1_2", "question": "Q?", "answer": "A", "answer_aliases": [], "answerable": True,
    "paragraphs": [{"idx": 0, "title": "T", "paragraph_text": "text", "is_supporting": True}],
    "question_decomposition": [{"id": 1, "question": "q1", "answer": "A", "paragraph_support_idx": 0}],
}


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def numbered(record: dict, i: int) -> dict:
    """The record under its own id (a question or passage id may not repeat in a file)."""
    return {**record, "id": f"{record['id']}-{i}"} if "id" in record else record


def test_data_format_error_is_value_error():
    assert issubclass(DataFormatError, ValueError)


@pytest.mark.parametrize(
    ("reader", "good"),
    [
        (load_questions, MUSIQUE_LINE),
        (load_questions, {"id": "q", "question": "Q?", "golden_answers": ["a"], "metadata": {}}),
        (read_corpus, {"id": "1", "contents": "T\ntext"}),
        (load_nli, {"premise": "p", "hypothesis": "h", "label": 0, "source": "s"}),
    ],
)
def test_broken_jsonl_line_names_file_and_line(tmp_path, reader, good):
    lines = [json.dumps(numbered(good, i)) for i in range(2)]
    path = write_lines(tmp_path / "broken_file.jsonl", [*lines, '{"id": "x", "quest'])
    with pytest.raises(DataFormatError) as err:
        reader(path)
    message = str(err.value)
    assert "broken_file.jsonl" in message and "line 3" in message and "invalid JSON" in message


def test_missing_key_in_jsonl(tmp_path):
    bad = {k: v for k, v in MUSIQUE_LINE.items() if k != "answer"}
    path = write_lines(tmp_path / "musique.jsonl", [json.dumps(MUSIQUE_LINE), "", json.dumps(bad)])
    with pytest.raises(DataFormatError, match=r"musique\.jsonl, line 3: missing required key 'answer'"):
        load_questions(path, format="musique")


def test_missing_key_in_json_list_reports_record_index(tmp_path):
    record = {"_id": "1", "question": "Q?", "answer": "A", "type": "bridge",
              "context": [["T", ["s"]]], "supporting_facts": [["T", 0]]}
    broken = {k: v for k, v in record.items() if k != "question"}
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps([record, {**record, "_id": "2"}, broken]), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"hotpot\.json, record index 2: missing required key 'question'"):
        load_questions(path)


def test_broken_json_list_reports_line(tmp_path):
    path = tmp_path / "hotpot.json"
    path.write_text('[\n{"_id": "1"},\n{"_id": oops}\n]', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"hotpot\.json, line 3: invalid JSON"):
        load_questions(path)


def test_non_object_record(tmp_path):
    path = write_lines(tmp_path / "x.jsonl", [json.dumps(MUSIQUE_LINE), "[1, 2]"])
    with pytest.raises(DataFormatError, match="line 2: expected a JSON object, got list"):
        load_questions(path)


def test_flashrag_golden_answers_must_be_a_list(tmp_path):
    good = {"id": "a", "question": "Q?", "golden_answers": ["x"], "metadata": {}}
    path = write_lines(tmp_path / "test.jsonl", [json.dumps(good), json.dumps({**good, "golden_answers": "x"})])
    with pytest.raises(DataFormatError, match=r"test\.jsonl, line 2: 'golden_answers' must be a list"):
        load_questions(path)


def test_wrong_structure_is_reported_with_location(tmp_path):
    bad = {**MUSIQUE_LINE, "paragraphs": [{"idx": 0, "title": "T"}]}
    path = write_lines(tmp_path / "m.jsonl", [json.dumps(bad)])
    with pytest.raises(DataFormatError, match=r"line 1: missing required key 'paragraphs\[0\]\.paragraph_text'"):
        load_questions(path)


# --- values checked at load time (issue 12, item 8) -----------------------------------------------

FLASHRAG_LINE = {"id": "q", "question": "Q?", "golden_answers": ["a"], "metadata": {}}
HOTPOT_RECORD = {"_id": "1", "question": "Q?", "answer": "A", "type": "bridge",
                 "context": [["T", ["s"]]], "supporting_facts": [["T", 0]]}
PAGE = {"page_name": "P", "page_url": "https://example.org/p", "page_snippet": "snippet", "page_result": "<p>P</p>"}
CRAG_LINE = {"interaction_id": "i", "query": "q?", "answer": "a", "alt_ans": ["b"], "question_type": "simple",
             "query_time": "03/05/2024, 23:18:31 PT", "domain": "movie", "static_or_dynamic": "static",
             "search_results": [PAGE]}


@pytest.mark.parametrize(
    ("good", "bad", "message"),
    [
        (FLASHRAG_LINE, {"question": None}, "'question' must be a non-empty string, got null"),
        (FLASHRAG_LINE, {"question": "  "}, "'question' must be a non-empty string"),
        (FLASHRAG_LINE, {"golden_answers": []}, "'golden_answers' is empty"),
        (FLASHRAG_LINE, {"golden_answers": ["a", None]},
         "'golden_answers\\[1\\]' must be a string or a number, got null"),
        (FLASHRAG_LINE, {"golden_answers": [True]}, "'golden_answers\\[0\\]' must be a string or a number, got true"),
        (FLASHRAG_LINE, {"id": None}, "'id' must be a string or an integer, got null"),
        (FLASHRAG_LINE, {"metadata": {"context": {"title": [None], "sentences": [["s"]]}}},
         "'metadata.context\\[0\\] title' must be a string, got null"),
        (FLASHRAG_LINE, {"metadata": {"context": {"title": ["T"], "sentences": ["a sentence"]}}},
         "'metadata.context\\[0\\] sentences' must be a list of sentences"),
        (MUSIQUE_LINE, {"answer": None}, "'answer' must be a string or a number, got null"),
        (MUSIQUE_LINE, {"answer_aliases": ["x", None]}, "'answer_aliases\\[1\\]' must be a string or a number"),
        (MUSIQUE_LINE, {"paragraphs": [{"idx": 0, "title": "T", "paragraph_text": None}]},
         "'paragraphs\\[0\\].paragraph_text' must be a string, got null"),
        (CRAG_LINE, {"query": None}, "'query' must be a non-empty string, got null"),
        (CRAG_LINE, {"answer": None}, "'answer' must be a string or a number, got null"),
        (CRAG_LINE, {"alt_ans": [None]}, "'alt_ans\\[0\\]' must be a string or a number, got null"),
        (CRAG_LINE, {"search_results": [{**PAGE, "page_snippet": None}]},
         "'search_results\\[0\\].page_snippet' must be a string, got null"),
    ],
)
def test_bad_value_in_question_file_names_file_line_and_field(tmp_path, good, bad, message):
    path = write_lines(tmp_path / "questions.jsonl", [json.dumps(good), json.dumps({**good, **bad})])
    with pytest.raises(DataFormatError, match=rf"questions\.jsonl, line 2: {message}"):
        load_questions(path)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"answer": None}, "'answer' must be a string or a number, got null"),
        ({"question": ""}, "'question' must be a non-empty string"),
        ({"context": [["T", ["s"]], [None, ["s"]]]}, "'context\\[1\\] title' must be a string, got null"),
        ({"context": [["T", ["s", None]]]}, "'context\\[0\\] sentences\\[1\\]' must be a string, got null"),
    ],
)
def test_bad_value_in_json_list_names_record_index(tmp_path, bad, message):
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps([HOTPOT_RECORD, {**HOTPOT_RECORD, **bad}]), encoding="utf-8")
    with pytest.raises(DataFormatError, match=rf"hotpot\.json, record index 1: {message}"):
        load_questions(path)


def test_numeric_answers_are_read_as_text(tmp_path):
    path = write_lines(tmp_path / "q.jsonl", [json.dumps({**FLASHRAG_LINE, "golden_answers": [1990, 2.5]})])
    assert load_questions(path)[0].answers == ["1990", "2.5"]
    path = write_lines(tmp_path / "m.jsonl", [json.dumps({**MUSIQUE_LINE, "answer": 7, "answer_aliases": ["seven"]})])
    assert load_questions(path)[0].answers == ["7", "seven"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"id": "2", "contents": None}, "'contents' must be a string, got null"),
        ({"id": "2", "title": "T", "text": None}, "'text' must be a string, got null"),
        ({"id": "2", "title": None, "text": "t"}, "'title' must be a string, got null"),
        ({"id": None, "contents": "T\ntext"}, "'id' must be a string or an integer, got null"),
    ],
)
def test_bad_corpus_value_names_file_and_line(tmp_path, bad, message):
    path = write_lines(tmp_path / "corpus.jsonl", [json.dumps({"id": "1", "contents": "T\ntext"}), json.dumps(bad)])
    with pytest.raises(DataFormatError, match=rf"corpus\.jsonl, line 2: {message}"):
        read_corpus(path)


def test_null_nli_text_is_refused(tmp_path):
    path = write_lines(tmp_path / "nli.jsonl", [json.dumps({"premise": None, "hypothesis": "h", "label": 0})])
    with pytest.raises(DataFormatError, match=r"nli\.jsonl, line 1: 'premise' must be a string, got null"):
        load_nli(path)


@pytest.mark.parametrize("reader", [load_questions, read_corpus, load_nli])
@pytest.mark.parametrize("content", ["", "\n  \n\t\n", "[]", " [ ]\n"])
def test_file_without_records_is_an_error(tmp_path, reader, content):
    path = tmp_path / "no_records.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"no_records\.jsonl holds no records"):
        reader(path)


@pytest.mark.parametrize("name", ["latin1.jsonl", "latin1.jsonl.bz2", "latin1.jsonl.gz"])
def test_non_utf8_jsonl_names_file_and_line(tmp_path, name):
    lines = [json.dumps(numbered(FLASHRAG_LINE, i)).encode() for i in range(2)]
    lines.append('{"id": "x", "question": "caf\u00e9?"}'.encode("latin-1"))
    data = b"\n".join(lines) + b"\n"
    path = tmp_path / name
    compress = {".bz2": bz2.compress, ".gz": gzip.compress}.get(path.suffix, bytes)
    path.write_bytes(compress(data))
    with pytest.raises(DataFormatError, match=rf"{name}, line 3: not UTF-8 text"):
        load_questions(path)


def test_non_utf8_json_list_names_line_and_byte_offset(tmp_path):
    data = json.dumps([HOTPOT_RECORD], indent=1).encode()
    data = data.replace(b'"Q?"', '"Qu\u00e9?"'.encode("latin-1"))
    path = tmp_path / "hotpot.json"
    path.write_bytes(data)
    offset = data.index(b"\xe9")
    line = data[:offset].count(b"\n") + 1
    with pytest.raises(DataFormatError, match=rf"hotpot\.json, line {line} \(byte offset {offset}\): not UTF-8 text"):
        load_questions(path)


def test_bad_last_record_fails_at_load_time_before_any_answer(tmp_path):
    """The runner answers `dataset.examples`, which parses the whole file first: a bad record at the very
    end stops the run before the LLM sees one question, instead of after it answered the first batches."""
    good = [json.dumps({**FLASHRAG_LINE, "id": f"q{i}"}) for i in range(50)]
    write_lines(tmp_path / "split.jsonl", [*good, json.dumps({**FLASHRAG_LINE, "id": "last", "golden_answers": []})])
    ds = QADataset(name="x", questions="split.jsonl", root=str(tmp_path))
    with pytest.raises(DataFormatError, match=r"split\.jsonl, line 51: 'golden_answers' is empty"):
        ds.examples


# --- missing files and fetching -------------------------------------------------------------------


@pytest.fixture
def online(monkeypatch):
    """Pretend the network is allowed; any real download attempt fails the test."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HOPRAG_OFFLINE", raising=False)

    def forbidden(*args):
        raise AssertionError(f"unexpected download {args}")

    monkeypatch.setattr(fetch, "download_url", forbidden)
    monkeypatch.setattr(fetch, "download_hf", forbidden)
    return monkeypatch


def test_unknown_missing_file_message(tmp_path, online):
    ds = QADataset(name="x", questions="mine/questions.jsonl", root=str(tmp_path))
    with pytest.raises(FileNotFoundError) as err:
        ds.examples
    message = str(err.value)
    root = tmp_path.resolve()
    assert str(root / "mine/questions.jsonl") in message
    assert f"data root in use: {root}" in message and "HOPRAG_DATA" in message


def test_archive_only_file_names_official_source(tmp_path, online):
    with pytest.raises(FileNotFoundError, match="HOPRAG_DATA.*github.com/Alab-NII/2wikimultihop"):
        QADataset(name="2wiki", questions="2wikimultihopqa/dev.json", root=str(tmp_path)).examples
    with pytest.raises(FileNotFoundError, match="github.com/StonyBrookNLP/musique"):
        QADataset(name="m", questions="musique/musique_ans_v1.0_dev.jsonl", root=str(tmp_path)).examples


@pytest.mark.parametrize("variable", ["HF_HUB_OFFLINE", "HOPRAG_OFFLINE"])
def test_offline_never_downloads(tmp_path, online, variable):
    online.setenv(variable, "1")
    ds = QADataset(name="bamboogle", questions="bamboogle/test.jsonl", root=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="HOPRAG_DATA.*Not downloaded: HF_HUB_OFFLINE"):
        ds.examples
    with pytest.raises(FileNotFoundError, match="curtis.ml.cmu.edu"):
        QADataset(name="h", questions="hotpotqa/hotpot_dev_distractor_v1.json", root=str(tmp_path)).examples


def test_fetch_from_flashrag_hub(tmp_path, online):
    calls = []

    def fake_hf(filename, root):
        calls.append((filename, root))
        record = {"id": "test_0", "question": "Q?", "golden_answers": ["a"], "metadata": {}}
        (root / filename).parent.mkdir(parents=True, exist_ok=True)
        (root / filename).write_text(json.dumps(record) + "\n", encoding="utf-8")

    online.setattr(fetch, "download_hf", fake_hf)
    ds = QADataset(name="bamboogle", questions="bamboogle/test.jsonl", root=str(tmp_path))
    assert [ex.id for ex in ds] == ["test_0"] and ds.examples[0].dataset == "bamboogle"
    assert calls == [("bamboogle/test.jsonl", tmp_path.resolve())]
    QADataset(name="bamboogle", questions="bamboogle/test.jsonl", root=str(tmp_path)).examples
    assert len(calls) == 1  # present now: not fetched again


def test_fetch_hotpotqa_official_url(tmp_path, online):
    urls = []

    def fake_url(url, dest):
        urls.append(url)
        record = {"_id": "h1", "question": "Q?", "answer": "A", "type": "bridge", "level": "hard",
                  "context": [["T", ["One.", " Two."]]], "supporting_facts": [["T", 1]]}
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps([record]), encoding="utf-8")

    online.setattr(fetch, "download_url", fake_url)
    ds = QADataset(name="hotpotqa", questions="hotpotqa/hotpot_dev_distractor_v1.json", root=str(tmp_path))
    assert ds.examples[0].context[0].text == "One. Two."
    assert urls == ["http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json"]


def test_failed_download_is_a_file_not_found(tmp_path, online):
    def unreachable(filename, root):
        raise OSError("network is unreachable")

    online.setattr(fetch, "download_hf", unreachable)
    with pytest.raises(FileNotFoundError, match="HOPRAG_DATA.*Download failed: network is unreachable"):
        QADataset(name="nq", questions="nq/test.jsonl", root=str(tmp_path)).examples


def test_missing_corpus_file(tmp_path, online):
    record = {"id": "q", "question": "Q?", "golden_answers": ["a"], "metadata": {}}
    (tmp_path / "q.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    ds = QADataset(name="x", questions="q.jsonl", corpus="corpus/none.jsonl", root=str(tmp_path))
    assert len(ds) == 1
    with pytest.raises(FileNotFoundError, match="corpus/none.jsonl.*HOPRAG_DATA"):
        ds.corpus()
