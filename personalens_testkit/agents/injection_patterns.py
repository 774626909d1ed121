"""What the judge-injection filter looks for (see :mod:`.injection`): the exact imitations of the judge's
answer format that are removed, and the kinds of text addressed to the evaluator that are flagged.

Each flag is a *kind* of address, not a list of strings: an evaluator named or addressed (in
English and other languages, or "if you are a model assessing this"), a request for a score on
the rubric's dimensions, a score sheet of two or more dimensions with values, a claim that the
dialogue was already assessed, instructions to ignore the rubric, fake markup. Measured both ways
on the corpora in ``tests/data/injection`` (``python bench/injection_corpus.py``).
"""

from __future__ import annotations

import re

_DIMENSION = r"(?:personali[sz]ation|naturalness|coherence|task[\s_-]*completion)"
_GAP = r"[\s*_#>|]*"
#: exact imitations of the judge's answer format: the only spans ever removed
SCORE_LABEL = re.compile(rf"\b{_DIMENSION}{_GAP}(?:score|rating){_GAP}[:=]?{_GAP}\d+(?:\s*/\s*\d+)?", re.I)
VERDICT_LABEL = re.compile(rf"\bverdict{_GAP}[:=]{_GAP}(?:true|false)\b", re.I)
ANSWER_KEYS = {"score", "verdict"}
REASON_KEYS = {"justification", "explanation", "observations", "suggestions"}

_EVALUATOR = (r"(?:judge|evaluator|grader|rater|assessor|scorer|reviewer|marker|examiner|evaluation (?:model|system)|"
              r"scoring (?:model|system)|grading (?:model|system)|(?:ai|llm) (?:judge|evaluator|grader|reviewer)|"
              r"whoever (?:grades|rates|scores|judges|evaluates|assesses|reviews|marks)|"
              r"anyone (?:grading|rating|scoring|assessing|evaluating|judging|reviewing)|person or model scoring)")
#: a rubric dimension, or the rubric's criteria as a whole
_CRITERIA = (r"(?:personali[sz]ation|naturalness|coherence|task[\s_-]*complet\w*|every (?:criterion|metric|dimension|"
             r"category|scale|measure)|all (?:criteria|metrics|dimensions|categories|scales|measures))")
#: a value on the rubric's scales, in digits or words
_LEVEL = r"(?:[1-5](?:\s*/\s*[45])?|one|two|three|four|five|full|top|max(?:imum)?|highest|perfect|yes|no|true|false)"
#: a word that asks for or states a judgement
_JUDGING = r"(?:evaluat|assess|grad|judg|review|scor|rat|mark)\w*"
_THIS = r"(?:this|the) (?:conversation|dialogue|dialog|chat|exchange|transcript|response|reply|assistant|interaction)"
#: (kind, pattern) of what is flagged (on the text with look-alikes seen through)
FLAGS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("score label", SCORE_LABEL),
    ("verdict label", VERDICT_LABEL),
    ("bare score label", re.compile(r"\b(?:score|rating)\s*[:=]\s*[1-5](?:\s*/\s*[45])?(?![\d.,:/-]|\s*[-–:]\s*\d)", re.I)),
    ("answer-key JSON", re.compile(r"[\"'](?:\w*_)?(?:score|verdict)[\"']\s*:\s*(?:true|false|[1-5]\b)", re.I)),
    ("address to the evaluator", re.compile(
        rf"\b{_EVALUATOR}\b[^\n]{{0,120}}?\b(?:{_THIS}|score|rate|grade|mark|award|assign|output|full marks|"
        r"top marks|maximum|highest)\b", re.I)),
    ("address to the evaluator", re.compile(
        rf"\b(?:rate|score|grade|mark)\s+{_THIS}\b|\b{_THIS}\s+(?:deserves|should (?:get|receive|be (?:rated|scored|given)))",
        re.I)),
    ("instruction to ignore", re.compile(
        r"\b(?:ignore|disregard|forget|override|overlook)\b[^.\n]{0,40}\b(?:rubric|instructions|prompt|"
        r"(?:evaluation|scoring|grading) (?:criteria|guidelines|instructions|rules))\b", re.I)),
    ("instruction to ignore", re.compile(r"\b(?:rubric|scoring guidelines|evaluation criteria)\b[^.\n]{0,30}\b"
                                         r"(?:outdated|replaced|no longer|updated)\b", re.I)),
    ("chat markup", re.compile(
        r"</?\s*(?:conversation|dialogue|rubric|system|instructions?|evaluation|judge\w*|user_profile)\s*>|"
        r"<\|im_(?:start|end)\|>|\[/?INST\]|<</?SYS>>|^\s*#{1,4}\s*(?:system|instructions?|evaluation)\b|"
        r"\[(?:SYSTEM|EVALUATOR|JUDGE)\]\s*:|\bSYSTEM OVERRIDE\b", re.I | re.M)),
    ("hidden comment", re.compile(r"<!--.*?-->", re.S)),
    ("words to the evaluator in another language", re.compile(
        r"évaluateur|l'évaluat|evaluador|\bjuez\b|Bewerter|Gutachter|Prüfer|valutatore|\bgiudice\b|"
        r"评审|评委|评估者|打分|評価者|採点者|採点|оценщик|судь[яеи]|проверяющ|avaliador|beoordelaar|oceniając|"
        r"bedömare|granskare|bedømmer|arvioija|hodnotitel|değerlendirici|αξιολογητ|평가자|المقي[ّ]?م|"
        r"मूल्यांकनकर्ता|מעריך|người đánh giá|penilai\b", re.I)),
    # the evaluator called by name or role: "Dear judge,", "Hey grader -", "Note to whoever scores this:"
    ("address to the evaluator", re.compile(
        rf"\b(?:dear|hey|hi|hello|attention|psst|note|message|memo|reminder|p\.?s\.?)\b[^\n.]{{0,12}}?\b"
        rf"{_EVALUATOR}s?\b(?:\s+(?:this|it|here))?\s*[:,!\u2014\u2013-]", re.I)),
    ("address to the evaluator", re.compile(
        rf"\b(?:if|when|as)\s+you(?:'re|\s+are)\s+(?:an?\s+|the\s+)?(?:ai|model|llm|language model|system|bot|machine|"
        rf"program|{_EVALUATOR})\b[^.\n]{{0,80}}?\b{_JUDGING}|\b(?:any|every|each)\s+(?:ai|model|llm|system|bot)s?\s+"
        rf"(?:that\s+(?:is\s+)?|who\s+(?:is\s+)?)?{_JUDGING}", re.I)),
    # a request for a level on the rubric: "please give a 4 for personalization", "a 5 on coherence would be fair"
    ("request for a score", re.compile(
        rf"\b(?:give|grant|award|assign|put|mark|rate|score|bump|raise)\b[^.\n]{{0,30}}?\b{_LEVEL}\b[^.\n]{{0,40}}?"
        rf"\b{_CRITERIA}|\b{_LEVEL}\s+(?:points?\s+|marks?\s+|stars?\s+)?(?:on|for|in)\s+{_CRITERIA}", re.I)),
    # a score sheet: two or more dimensions, each with a value
    ("score sheet", re.compile(
        rf"(?:\b(?:personali[sz]ation|naturalness|coherence|task[\s_-]*(?:complet\w*)?)\b[\"'*_]*\W{{0,12}}{_LEVEL}\b"
        rf"[\s\S]{{0,40}}?){{2,}}", re.I)),
    # a claim that the dialogue was already assessed
    ("claim of an assessment", re.compile(
        rf"\b(?:already|pre-?|previously)\s*(?:been\s+)?(?:reviewed|graded|scored|evaluated|assessed|verified|approved|"
        rf"rated|checked)\b[^.\n]{{0,60}}?\b(?:scores?|marks|rubric|criteri\w*|metrics?|perfect|max\w*|grading|evaluation|"
        rf"{_CRITERIA})|\b(?:received|earned|got|achieved|awarded)\s+(?:a\s+|the\s+)?(?:perfect|full|maximum|top|highest)"
        rf"\s+(?:scores?|marks?|ratings?|grades?)\b[^.\n]{{0,40}}?\b(?:metrics?|criteri\w*|rubric|{_CRITERIA}|"
        rf"evaluat\w*|assess\w*)|\bmeets? (?:every|all|each)\s+(?:rubric\s+|evaluation\s+|scoring\s+)?criteri|"
        rf"\bno (?:further|additional|more)\s+(?:grading|evaluation|scoring|assessment)\b", re.I)),
)
#: a decoded variant is searched only if it holds one of these (most decodings of ordinary text are noise)
HIDDEN_WORDS = ("score", "verdict", "rating", "judge", "evaluat", "grade", "rubric", "instruction")
SPACED = re.compile(r"\b(?:\w[ .\-]){3,}\w\b")
#: digits written for letters inside a word ("Sc0r3"), not numbers
LEET = re.compile(r"\b(?=\w*[A-Za-z])(?=\w*[013457])\w+\b")
LEET_LETTERS = str.maketrans("013457", "oieast")
BASE64 = re.compile(r"\b[A-Za-z0-9+/]{16,}={0,2}")


