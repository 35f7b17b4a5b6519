# ruff: noqa: E501  (the templates read best one to a line)
"""Personal data masking measured on values this project did not write: Faker's providers (names, phone numbers,
national identifiers, IBANs, passports, street addresses, e-mail addresses, dates of birth, cards, IP addresses) in
the formats each locale publishes, in 25 locales and their scripts, planted in sentences of their language with and
without a cue; e-mail addresses also written obfuscated ("x dot y at z dot com", "x(at)z(dot)com", full-width ＠)
and phone numbers also spelled as number words. Benign look-alikes: ISBN-13, EAN-13, UUIDs, git hashes, ISO 8601
timestamps, versions, tracking and invoice numbers, class names and company names.

Every text goes through the product's own path (shadow.read_traffic on a JSONL log: the masker, the log-wide sweep,
the independent detector's findings masked too), once per policy, and what would be stored and sent is read back:

- recall per category: no identifying part of the planted value (a word of it that is no common word, a run of 3+
  digits) is left in any stored text of its record;
- benign kept: the look-alike is left exactly as written;
- records lost: quarantined records (a masking policy never drops one for what it found).

    .venv/bin/python bench/pii_masking.py [--seed 2026] [--per-category 40] [--out bench/results/pii_masking.md]

The seed 2026 is the report's; the tests draw with other seeds (tests/arena/test_masking.py).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from faker import Faker

from holistic_dagster.config.shadow import ShadowSpec
from holistic_dagster.shadow import read_traffic

LOCALES = {
    "en_US": "en", "en_GB": "en", "de_DE": "de", "fr_FR": "fr", "es_ES": "es", "it_IT": "it", "pt_BR": "pt",
    "nl_NL": "nl", "pl_PL": "pl", "sv_SE": "sv", "tr_TR": "tr", "cs_CZ": "cs", "hu_HU": "hu", "fi_FI": "fi",
    "ru_RU": "ru", "uk_UA": "uk", "el_GR": "el", "ar_AA": "ar", "he_IL": "he", "hi_IN": "hi", "zh_CN": "zh",
    "zh_TW": "zh", "ja_JP": "ja", "ko_KR": "ko", "id_ID": "id",
}  # fmt: skip
# a cue in the sentence's language, or none ("{}" alone, or the value inside plain prose)
TEMPLATES = {
    "en": ["Please contact {} about this.", "{}", "Details: {}", "It was sent by {} yesterday."],
    "de": ["Bitte wenden Sie sich an {}.", "Angaben: {}", "Gestern kam {} vorbei."],
    "fr": ["Merci de contacter {}.", "Coordonnées : {}", "Hier, {} est passé."],
    "es": ["Por favor, contacte con {}.", "Datos: {}", "Ayer vino {} a la tienda."],
    "it": ["Per favore contatta {}.", "Dati: {}", "Ieri è passato {}."],
    "pt": ["Por favor, fale com {}.", "Dados: {}", "Ontem {} passou aqui."],
    "nl": ["Neem contact op met {}.", "Gegevens: {}"], "pl": ["Proszę skontaktować się z {}.", "Dane: {}"],
    "sv": ["Kontakta {} om detta.", "Uppgifter: {}"], "tr": ["Lütfen {} ile iletişime geçin.", "Bilgiler: {}"],
    "cs": ["Kontaktujte prosím {}.", "Údaje: {}"], "hu": ["Kérem, keresse {} ügyében.", "Adatok: {}"],
    "fi": ["Ota yhteyttä: {}.", "Tiedot: {}"], "ru": ["Свяжитесь, пожалуйста, с {}.", "Данные: {}", "Вчера {} приходил."],
    "uk": ["Зверніться, будь ласка, до {}.", "Дані: {}"], "el": ["Παρακαλώ επικοινωνήστε με {}.", "Στοιχεία: {}"],
    "ar": ["يرجى التواصل مع {} بخصوص الطلب.", "البيانات: {}"], "he": ["נא לפנות אל {} בנושא.", "פרטים: {}"],
    "hi": ["कृपया {} से संपर्क करें।", "विवरण: {}"], "zh": ["请联系{}处理。", "资料：{}", "昨天{}来过。"],
    "ja": ["{}に連絡してください。", "情報：{}", "昨日{}が来ました。"], "ko": ["{}에게 연락해 주세요.", "정보: {}"],
    "id": ["Silakan hubungi {} segera.", "Data: {}"],
}  # fmt: skip
CATEGORIES = ("person", "phone", "national_id", "iban", "passport", "address", "email", "date_of_birth",
              "credit_card", "ip", "spelled_phone")  # fmt: skip
_SPELLED = {"en": "zero one two three four five six seven eight nine", "de": "null eins zwei drei vier fünf sechs sieben acht neun",
            "fr": "zéro un deux trois quatre cinq six sept huit neuf", "es": "cero uno dos tres cuatro cinco seis siete ocho nueve",
            "ru": "ноль один два три четыре пять шесть семь восемь девять"}  # fmt: skip


def _value(fake: Faker, category: str, rng: random.Random, language: str) -> str:
    if category == "person":
        return fake.name()
    if category == "phone":
        return fake.phone_number()
    if category == "national_id":
        return fake.ssn()
    if category == "iban":
        return fake.iban()
    if category == "passport":
        return fake.passport_number()
    if category == "address":
        return fake.street_address().replace("\n", ", ")
    if category == "email":
        email = fake.email()
        user, domain = email.split("@")
        style = rng.randrange(4)
        if style == 1:
            return f"{user.replace('.', ' dot ')} at {domain.replace('.', ' dot ')}"
        if style == 2:
            return f"{user}(at){domain.replace('.', '(dot)')}"
        return f"{user}＠{domain}" if style == 3 else email
    if category == "date_of_birth":
        born = fake.date_of_birth(minimum_age=18, maximum_age=90)
        return rng.choice(
            [born.isoformat(), born.strftime("%d.%m.%Y"), born.strftime("%m/%d/%Y"), born.strftime("%B %d, %Y")]
        )
    if category == "credit_card":
        return fake.credit_card_number()
    if category == "ip":
        return rng.choice([fake.ipv4_public(), fake.ipv6()])
    words = _SPELLED.get(language, _SPELLED["en"]).split()
    return " ".join(words[int(d)] for d in re.sub(r"\D", "", Faker("en_US").msisdn())[:10])


def planted(seed: int, per_category: int) -> list[tuple[str, str, str]]:
    """(category, value, sentence) triples drawn with the seed."""
    rng = random.Random(seed)
    fakers = {locale: Faker(locale) for locale in LOCALES}
    for i, fake in enumerate(fakers.values()):
        fake.seed_instance(seed * 1000 + i)
    out = []
    for category in CATEGORIES:
        for _ in range(per_category):
            locale = rng.choice(list(LOCALES))
            language = LOCALES[locale]
            value = _value(fakers[locale], category, rng, language).strip()
            cue = {"date_of_birth": "DOB: {}", "passport": "Passport {}", "national_id": "ID {}"}.get(category)
            template = cue if cue and rng.random() < 0.3 else rng.choice(TEMPLATES[language])
            out.append((category, value, template.format(value)))
    return out


def benign(seed: int, count: int) -> list[tuple[str, str, str]]:
    """(kind, value, sentence): look-alikes that identify nobody, written as people write them."""
    rng, fake = random.Random(seed + 1), Faker("en_US")
    fake.seed_instance(seed + 1)
    makers = {
        "isbn": lambda: (fake.isbn13(), "ISBN {} is out of print."), "ean": lambda: (fake.ean13(), "EAN {} scanned at the till."),
        "uuid": lambda: (fake.uuid4(), "Request {} failed with a timeout."), "git hash": lambda: (fake.sha1()[: rng.choice((7, 12, 40))], "Reverted commit {} this morning."),
        "timestamp": lambda: (fake.iso8601(), "The job finished at {}."), "version": lambda: (f"{rng.randint(1, 20)}.{rng.randint(0, 40)}.{rng.randint(0, 300)}", "Upgrade to version {} first."),
        "tracking": lambda: ("1Z" + fake.bothify("###??#########").upper(), "Tracking number {} shows it left the depot."),
        "invoice": lambda: (f"INV-{rng.randint(2019, 2026)}-{rng.randint(1000, 99999)}", "Invoice {} is overdue."),
        "class name": lambda: ("".join(w.capitalize() for w in fake.words(rng.randint(2, 3))) + rng.choice(("Service", "Factory", "Handler")), "The {} class throws on null."),
        "company": lambda: (fake.company(), "We signed with {} last week."),
    }  # fmt: skip
    out = []
    for _ in range(count):
        kind = rng.choice(list(makers))
        value, template = makers[kind]()
        out.append((kind, value, template.format(value)))
    return out


def _parts(value: str) -> list[str]:
    """The identifying parts of a value: runs of 3+ digits, and words that are no common English word."""
    from holistic_dagster.shadow import lexicon

    digits = re.findall(r"\d{3,}", re.sub(r"(?<=\d)[ .\-/()]+(?=\d)", "", value))
    words = [
        w
        for w in re.findall(r"[^\W\d_]{2,}", value)
        if (len(w) >= 3 or not w.isascii()) and (lexicon.rank(w, "en") is None or lexicon.is_name(w))
    ]
    return [*digits, *words] or [value]


def _stored(records) -> dict[int, str]:
    return {
        r.line: "\n".join([r.record_id, r.slice, r.prompt, r.response, *(m["content"] for m in r.messages)])
        for r in records
    }


def run(texts: list[str], policy: str) -> tuple[dict[int, str], int]:
    """Every text as one record of one log, through read_traffic under the policy: line -> what is stored."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "log.jsonl"
        lines = [{"id": f"r{i}", "request": {"messages": [{"role": "user", "content": t}]},
                  "response": {"choices": [{"message": {"content": "Noted."}}]}} for i, t in enumerate(texts)]  # fmt: skip
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
        spec = ShadowSpec.model_validate(
            {"production": "prod", "candidates": ["c"], "judge": "j", "pii": {"policy": policy}}
        )
        records, quarantined = read_traffic(path, spec)
    return _stored(records), len(quarantined)


def measure(seed: int, per_category: int, policy: str) -> dict:
    cases, looks = planted(seed, per_category), benign(seed, per_category * 4)
    started = time.perf_counter()
    stored, lost = run([t for *_, t in cases] + [t for *_, t in looks], policy)
    recall, misses = defaultdict(list), []
    for line, (category, value, text) in enumerate(cases, start=1):
        out = stored.get(line, "")
        flat = re.sub(r"(?<=\d)[ .\-/()]+(?=\d)", "", out)
        kept = [p for p in _parts(value) if re.search(rf"(?<![^\W\d_]){re.escape(p)}(?![^\W\d_])", flat)]
        recall[category].append(not kept)
        if kept:
            misses.append((category, text, out.split("\n")[2]))
    kept_benign, changed = defaultdict(list), []
    for line, (kind, value, text) in enumerate(looks, start=len(cases) + 1):
        ok = value in stored.get(line, "")
        kept_benign[kind].append(ok)
        if not ok:
            changed.append((kind, text, stored.get(line, "").split("\n")[2]))
    return {"policy": policy, "seed": seed, "seconds": time.perf_counter() - started, "lost": lost,
            "recall": {c: (sum(v), len(v)) for c, v in recall.items()}, "benign": {k: (sum(v), len(v)) for k, v in kept_benign.items()},
            "misses": misses, "changed": changed}  # fmt: skip


def _share(pair) -> str:
    return f"{pair[0]}/{pair[1]} ({pair[0] / pair[1]:.1%})" if pair[1] else "-"


def report(results: list[dict], per_category: int) -> str:
    seed = results[0]["seed"]
    lines = [f"# Personal data masking on Faker's values (seed {seed}, {per_category} values per category, 25 locales)", "",
             "Built and measured by `bench/pii_masking.py` (see its docstring): every text through `shadow.read_traffic`, "
             "what would be stored and sent read back.", "",
             "| category | " + " | ".join(f"{r['policy']} policy" for r in results) + " |", "|---|" + "---|" * len(results)]  # fmt: skip
    for category in results[0]["recall"]:
        lines.append(f"| {category} | " + " | ".join(_share(r["recall"][category]) for r in results) + " |")
    totals = [tuple(sum(v[i] for v in r["recall"].values()) for i in (0, 1)) for r in results]
    lines.append("| **all planted values kept out** | " + " | ".join(f"**{_share(t)}**" for t in totals) + " |")
    lines += [
        "",
        "| benign look-alike kept as written | " + " | ".join(r["policy"] for r in results) + " |",
        "|---|" + "---|" * len(results),
    ]
    for kind in sorted(results[0]["benign"]):
        lines.append(f"| {kind} | " + " | ".join(_share(r["benign"][kind]) for r in results) + " |")
    totals = [tuple(sum(v[i] for v in r["benign"].values()) for i in (0, 1)) for r in results]
    lines.append("| **all benign kept** | " + " | ".join(f"**{_share(t)}**" for t in totals) + " |")
    lines += ["", "Records lost (quarantined): " + ", ".join(f"{r['policy']} {r['lost']}" for r in results) + "; seconds: "
              + ", ".join(f"{r['policy']} {r['seconds']:.0f}" for r in results) + ".", ""]  # fmt: skip
    for r in results:
        lines += [f"## {r['policy']}: misses (first 20 of {len(r['misses'])})", ""]
        lines += [f"- {c}: `{t}` -> `{o}`" for c, t, o in r["misses"][:20]]
        lines += ["", f"## {r['policy']}: benign changed (first 12 of {len(r['changed'])})", ""]
        lines += [f"- {k}: `{t}` -> `{o}`" for k, t, o in r["changed"][:12]] + [""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--per-category", type=int, default=40)
    parser.add_argument("--out", type=Path, default=Path("bench/results/pii_masking.md"))
    args = parser.parse_args()
    results = [measure(args.seed, args.per_category, policy) for policy in ("mask", "precise")]
    text = report(results, args.per_category)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
