"""Few-shot chain-of-thought exemplars: 3 per dataset, as TreeRare's baselines use (spec/treerare.md App. B).

Multi-hop: each was written for hoprag from one question of the bundled *train* samples (never a dev question;
`source` names the record: HotpotQA `hotpot_train_99.json` `_id`, 2Wiki `train_500.json` `_id`, MuSiQue
`musique_ans_train_98.jsonl` `id`), its steps restating the record's supporting facts.

Ambiguous (ASQA, AmbigDocs; `LongFormExemplar`): TreeRare's form for the ambiguous task, a long-form final
answer that holds every interpretation's answer (§3 item 6). The official files are not bundled, so each was
written for hoprag from a published copy of a real record (`source`: split and id where the copy gives them, and
where it was read); the steps and the long answer restate its gold annotations (ASQA's `qa_pairs`, AmbigDocs'
per-document answers), and `gold` keeps those answers, one tuple per interpretation. Whatever their split, these
questions are never evaluated: `conf/data/asqa.yaml` and `ambigdocs.yaml` list them in `exclude_questions`,
which leaves them out of the evaluated split and counts them (tests/unit/test_ambiguous_exemplars.py holds the
lists to the exemplars). The keys are the `data` config names they serve (`exemplars_for`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exemplar:
    """A worked question: its reasoning `steps`, its short `answer`, and the train record it was written from."""

    question: str
    steps: tuple[str, ...]
    answer: str
    source: str

    def final(self) -> str:
        """The answer line: `#FINAL: The answer is <answer>.`"""
        return f"#FINAL: The answer is {self.answer}."

    def explained(self) -> str:
        """The TreeRare answer form: `#Explanations: <steps>` then the answer line."""
        return f"#Explanations: {' '.join(self.steps)}\n{self.final()}"


@dataclass(frozen=True)
class LongFormExemplar(Exemplar):
    """An ambiguous question worked out: one step per interpretation, `answer` the long-form answer holding
    each interpretation's gold answer (`gold`: its accepted short forms)."""

    gold: tuple[tuple[str, ...], ...] = ()

    def final(self) -> str:
        """TreeRare's ambiguous answer line: the long-form answer itself after `#FINAL:`."""
        return f"#FINAL: {self.answer}"


EXEMPLARS: dict[str, tuple[Exemplar, ...]] = {
    "hotpotqa": (
        Exemplar(
            "Who directed the film that was shot in or around Leland, North Carolina in 1986",
            (
                "Maximum Overdrive (1986) is a film shot in or around Leland, North Carolina.",
                "Maximum Overdrive was written and directed by Stephen King.",
            ),
            "Stephen King",
            "5a8718c25542991e771816c7",
        ),
        Exemplar(
            "Are Christopher Nolan and Sathish Kalathil both film directors?",
            (
                "Christopher Nolan is an English-American film director.",
                "Sathish Kalathil is an Indian film and documentary director.",
                "So both are film directors.",
            ),
            "yes",
            "5ae40c465542996836b02c25",
        ),
        Exemplar(
            "Grace Krilanovich's first novel was published by an independent mom-and-pop publishing house that "
            "was founded in 2005, and is based where?",
            (
                "Grace Krilanovich's first novel, The Orange Eats Creeps, was published by Two Dollar Radio.",
                "Two Dollar Radio, founded in 2005, is an independent publishing house based in Columbus, Ohio.",
            ),
            "Columbus, Ohio",
            "5ab3c131554299233954ff9c",
        ),
    ),
    "2wiki": (
        Exemplar(
            "Who is the child of the director of film Devotion (1929 Film)?",
            ("The film Devotion (1929) was directed by Guido Brignone.", "Guido Brignone's child is Lilla Brignone."),
            "Lilla Brignone",
            "d79ff79a0bda11eba7f7acde48001122",
        ),
        Exemplar(
            "Which film has the director died first, The Prairie King or Confessions Of An Opium Eater?",
            (
                "The Prairie King was directed by B. Reeves Eason, who died on June 9, 1956.",
                "Confessions of an Opium Eater was directed by Albert Zugsmith, who died on October 26, 1993.",
                "B. Reeves Eason died first.",
            ),
            "The Prairie King",
            "58f39f7808b511ebbd88ac1f6bf848b6",
        ),
        Exemplar(
            "Are both villages, Stanari and Krasnoye, Prokhorovsky District, Belgorod Oblast, located in the "
            "same country?",
            (
                "Krasnoye, Prokhorovsky District, Belgorod Oblast is in Russia.",
                "Stanari is in Bosnia and Herzegovina.",
                "So they are in different countries.",
            ),
            "no",
            "2f472466097711ebbdb0ac1f6bf848b6",
        ),
    ),
    "musique": (
        Exemplar(
            "Who was the first president of the association which published Journal of Psychotherapy Integration?",
            (
                "The Journal of Psychotherapy Integration is published by the American Psychological Association.",
                "The first president of the American Psychological Association was G. Stanley Hall.",
            ),
            "G. Stanley Hall",
            "2hop__150763_14904",
        ),
        Exemplar(
            "What is the name of the waterfall in the country where the Bubye River is found?",
            ("The Bubye River is in Zimbabwe.", "The waterfall in Zimbabwe is Victoria Falls."),
            "Victoria Falls",
            "2hop__205146_62031",
        ),
        Exemplar(
            "Who was in charge of the country where the composer of Aschenbrodel was a citizen?",
            (
                "Aschenbrödel was composed by Johann Strauss II.",
                "Johann Strauss II was a citizen of Austria.",
                "Karl Renner was in charge of Austria.",
            ),
            "Karl Renner",
            "3hop1__404363_705261_126049",
        ),
    ),
    # ASQA: the table evaluates dev; two train records as the ASQA test data of tensorflow/datasets gives them
    # (tensorflow_datasets/datasets/asqa/dummy_data/ASQA.json, its qa_pairs), and the example record of the
    # din0s/asqa dataset card (split not stated, id printed rounded)
    "asqa": (
        LongFormExemplar(
            "Who won the 2016 ncaa football national championship?",
            (
                "The question can mean the championship of the 2016 season or the title game played in 2016.",
                "The 2016 season's title game, played in January 2017, was won by the Clemson Tigers.",
                "The game played in January 2016 closed the 2015 season: the Alabama Crimson Tide beat Clemson"
                " 45-40.",
            ),
            "The Clemson Tigers won the national championship of the 2016 season, while the Alabama Crimson Tide"
            " won the championship game played in 2016, which closed the 2015 season.",
            "train -3582047784487750233 (tensorflow/datasets' copy)",
            (("Clemson Tigers", "2016 Clemson Tigers football team"),
             ("Alabama Crimson Tide", "2015 Alabama Crimson Tide football team")),
        ),
        LongFormExemplar(
            "When does the new bunk'd come out?",
            (
                "The question does not say which new episode of Bunk'd it means.",
                "Episode 40 of Bunk'd came out on April 21, 2017.",
                "Episode 42 of Bunk'd came out on May 24, 2017.",
            ),
            "It depends on the episode: episode 40 of Bunk'd came out on April 21, 2017, and episode 42 on May 24,"
            " 2017.",
            "train -5742327688291876861 (tensorflow/datasets' copy)",
            (("April 21, 2017",), ("May 24, 2017",)),
        ),
        LongFormExemplar(
            "Where does the civil liberties act place the blame for the internment of u.s. citizens?",
            (
                "The Civil Liberties Act of 1988 granted reparations to the Japanese Americans interned during"
                " World War II.",
                "Its apology is made on behalf of the people of the United States, who are thereby blamed.",
                "Its reparations are paid by the United States government, which is thereby blamed too.",
            ),
            "The Civil Liberties Act of 1988 places the blame both on the people of the United States, on whose"
            " behalf it apologizes, and on the United States government, which it makes pay reparations to"
            " the interned Japanese Americans.",
            "sample_id -4557617869928758000 as the din0s/asqa card prints it (rounded; split not stated)",
            (("the people of the United States",), ("United States government",)),
        ),
    ),
    # AmbigDocs: the table evaluates test; these records were published without their split or qid, the first
    # two by the dataset's authors as their few-shot demonstrations (lilys012/AmbigDocs src/eval/qa.py), the
    # third in TreeRare's AmbigDocs CoT prompt (billycrapediem/TreeRare prompt/Ambig_Doc_COT.txt)
    "ambigdocs": (
        LongFormExemplar(
            "What is the location of the Griswold House?",
            (
                "Griswold House names several houses.",
                "Griswold House in Guilford, Connecticut stands east of Guilford Center, on Boston Street.",
                "The John N. A. Griswold House stands at 76 Bellevue Avenue in Newport, Rhode Island.",
            ),
            "Griswold House (Guilford, Connecticut) is located east of Guilford Center, and the John N. A."
            " Griswold House is located at 76 Bellevue Avenue in Newport, Rhode Island.",
            "AmbigDocs authors' demonstration (lilys012/AmbigDocs src/eval/qa.py)",
            (("east of Guilford Center",), ("76 Bellevue Avenue in Newport, Rhode Island",)),
        ),
        LongFormExemplar(
            "Who is the playable character in Edna & Harvey?",
            (
                "Edna & Harvey names two adventure games.",
                "In Edna & Harvey: The Breakout the player is Edna, locked in a mental hospital.",
                "In Edna & Harvey: Harvey's New Eyes the player controls Lilli.",
            ),
            "In Edna & Harvey: The Breakout the playable character is Edna, and in Edna & Harvey: Harvey's New"
            " Eyes it is Lilli.",
            "AmbigDocs authors' demonstration (lilys012/AmbigDocs src/eval/qa.py)",
            (("Edna",), ("Lilli",)),
        ),
        LongFormExemplar(
            "What is the age range for membership in the Young Conservatives?",
            (
                "Young Conservatives names the youth wings of more than one party.",
                "The Young Conservatives of the Czech Republic, the Civic Democratic Party's youth wing, admit"
                " members aged 15 to 35.",
                "The Young Conservatives of the United Kingdom, the Conservative Party's youth wing, are for"
                " members aged 25 and under.",
            ),
            "The Young Conservatives (Czech Republic) admit members from 15 to 35, while the Young Conservatives"
            " (UK) are for members aged 25 and under.",
            "TreeRare's AmbigDocs CoT demonstration (billycrapediem/TreeRare prompt/Ambig_Doc_COT.txt)",
            (("15 to 35",), ("25 and under",)),
        ),
    ),
}


def exemplars_for(name: str) -> tuple[Exemplar, ...]:
    """The exemplars for dataset `name`; a variant such as `hotpotqa_train` or `2wiki_open` gets its base's."""
    key = name if name in EXEMPLARS else name.split("_")[0]
    if key not in EXEMPLARS:
        raise ValueError(
            f"no few-shot CoT exemplars for data {name!r} (hoprag/search/cot_exemplars.py has {sorted(EXEMPLARS)}):"
            f" set method.exemplars=<one of them>, or method.mode=zero_shot"
        )
    return EXEMPLARS[key]
