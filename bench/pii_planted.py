# ruff: noqa: E501  (the planted values' templates read best one to a line)
"""PII removal measured on a planted set built here: personal values of 8 categories in 12 languages and many
formats, generated from a seed (names, numbers and keys drawn at random, so no value is one the rules were written
for), each planted in sentences of its language, with and without a cue; and benign look-alikes (order, ticket
and invoice numbers, versions, epoch times, prices, dates that are no birth date, hashes, company and software
words). Reported for the remover (shadow.pii) and the independent detector (shadow.pii_check) apart:

- recall per category: the planted value is gone from the remover's output / the detector flags it in the raw
  text;
- what the remover missed that the detector catches (the check's value is in the remover's blind spots);
- false positives on benign text: the remover changed it / the detector flagged it (a record it would quarantine).

    .venv/bin/python bench/pii_planted.py [--seed 7] [--per-category 60] [--out bench/results/pii_planted.md]
"""

from __future__ import annotations

import argparse
import random
import string
import time
from collections import defaultdict
from pathlib import Path

from stdnum import luhn, verhoeff

from holistic_dagster.shadow.pii import PiiRemover
from holistic_dagster.shadow.pii_check import find_pii

NAMES = {
    "en": (["Olivia", "Ethan", "Grace", "Liam", "Chloe", "Noah"], ["Whitaker", "Donovan", "Harrington", "Mercer"]),
    "de": (["Lukas", "Hannah", "Felix", "Marlene"], ["Brandt", "Vogel", "Hartmann", "Kessler"]),
    "fr": (["Camille", "Hugo", "Léa", "Mathis"], ["Lefèvre", "Moreau", "Girard", "Rousseau"]),
    "es": (["Lucía", "Mateo", "Carmen", "Diego"], ["Navarro", "Ortega", "Castillo", "Rubio"]),
    "ru": (["Алексей", "Наталья", "Сергей", "Екатерина"], ["Кузнецов", "Волкова", "Морозов", "Лебедева"]),
    "el": (["Δημήτρης", "Ελένη", "Κώστας", "Μαρία"], ["Παπαδάκης", "Γεωργίου", "Νικολάου", "Αντωνίου"]),
    "ar": (["محمد", "ليلى", "يوسف", "مريم"], ["العتيبي", "الحسيني", "المصري", "الشمري"]),
    "zh": (["伟", "静", "强", "敏"], ["张", "刘", "陈", "杨"]),
    "ja": (["翔太", "美咲", "大輔", "陽菜"], ["佐藤", "鈴木", "高橋", "伊藤"]),
    "ko": (["서연", "민준", "지우", "도윤"], ["김", "이", "최", "정"]),
    "hi": (["आरव", "अनन्या", "विवान", "दिया"], ["शर्मा", "वर्मा", "गुप्ता", "सिंह"]),
    "pl": (["Zofia", "Jakub", "Wiktoria", "Kacper"], ["Kowalczyk", "Wiśniewska", "Lewandowski", "Zielińska"]),
}
NAME_SENTENCES = {
    "en": ["Hi, my name is {}.", "Please forward this to {} in legal.", "Dear {}, your refund is ready.",
           "{} called about the delivery yesterday.", "Regards, {}"],
    "de": ["Mein Name ist {}.", "Bitte leiten Sie das an {} weiter.", "Sehr geehrte {}, vielen Dank."],
    "fr": ["Je m'appelle {}.", "Merci de transmettre à {}.", "Madame {} a appelé ce matin."],
    "es": ["Me llamo {}.", "Por favor, envíelo a {}.", "Estimada {}, gracias por escribir."],
    "ru": ["Меня зовут {}.", "Передайте, пожалуйста, {} мой вопрос.", "Уважаемый {}, спасибо."],
    "el": ["Με λένε {}.", "Παρακαλώ προωθήστε το στον {}.", "Αγαπητή {}, ευχαριστούμε."],
    "ar": ["اسمي {}.", "يرجى إرسال هذا إلى {}.", "السيد {} اتصل أمس."],
    "zh": ["我叫{}。", "请把这个转给{}先生。", "我的名字是{}，谢谢。"],
    "ja": ["私は{}です。", "{}さんに転送してください。", "氏名：{}"],
    "ko": ["제 이름은 {}입니다.", "{}님께 전달해 주세요."],
    "hi": ["मेरा नाम {} है।", "कृपया इसे {} को भेजें।"],
    "pl": ["Nazywam się {}.", "Proszę przekazać to {}.", "Pani {} dzwoniła wczoraj."],
}  # fmt: skip
BENIGN = [
    "Your order number is {n9}.", "Order {n10} ships tomorrow.", "Ticket {n9} was closed.",
    "Invoice {n10} totals {price} EUR.", "We upgraded to {ver} last night.", "The job ran at epoch {epoch}.",
    "Tracking number {n12} shows it left the depot.", "Reference {n8}, booking confirmed.",
    "The meeting is on {date}.", "Boeing and Airbus both ship {n3} planes a year.", "Edit config.yaml, then restart.",
    "Email: use the form on the website.", "Apple released version {ver} for the iPhone.",
    "Paris is the capital of France; Berlin of Germany.", "The sha256 is {hex}.", "Request id {uuid} failed.",
    "See https://example.com/Docs/Guide/Install{n3}Setup for details.", "Python {pyver} and numpy {ver3} are needed.",
    "Ваш заказ номер {n9} отправлен.", "订单号{n10}已发货。", "注文番号{n9}は発送済みです。",
    "Ihre Bestellnummer lautet {n9}.", "Le numéro de commande est {n10}.", "El pedido {n9} fue enviado.",
    "Room {n3}, floor {n1}; the temperature was {n2}.{n1} degrees.", "ISBN 978-3-{n2}-{n6}-{n1}.",
]  # fmt: skip


def _digits(rng: random.Random, n: int) -> str:
    return str(rng.randint(1, 9)) + "".join(rng.choice(string.digits) for _ in range(n - 1))


def _fill(template: str, rng: random.Random) -> str:
    d = {f"n{k}": _digits(rng, k) for k in (1, 2, 3, 6, 8, 9, 10, 12)}
    d |= {"price": f"{rng.randint(10, 9999)}.{rng.randint(10, 99)}",
          "ver": ".".join(str(rng.randint(0, 20)) for _ in range(4)), "ver3": f"{rng.randint(1, 3)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}",
          "pyver": f"3.{rng.randint(8, 13)}", "epoch": str(rng.randint(1_500_000_000, 1_800_000_000)),
          "date": f"{rng.randint(2020, 2027)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
          "hex": "".join(rng.choice("0123456789abcdef") for _ in range(64)),
          "uuid": "-".join("".join(rng.choice("0123456789abcdef") for _ in range(k)) for k in (8, 4, 4, 4, 12))}  # fmt: skip
    return template.format(**d)


def planted(rng: random.Random, per_category: int) -> list[tuple[str, str, str]]:
    """(category, value, text) triples."""
    out: list[tuple[str, str, str]] = []
    for _ in range(per_category):
        lang = rng.choice(list(NAMES))
        first, last = (rng.choice(part) for part in NAMES[lang])
        name = f"{last}{first}" if lang in ("zh", "ja", "ko") else f"{first} {last}"
        out.append(("person", name, rng.choice(NAME_SENTENCES[lang]).format(name)))
    for _ in range(per_category):
        y, m, d = rng.randint(1940, 2006), rng.randint(1, 12), rng.randint(1, 28)
        months = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
                  "November", "December"]  # fmt: skip
        value = rng.choice([f"{y}-{m:02d}-{d:02d}", f"{d:02d}.{m:02d}.{y}", f"{d:02d}/{m:02d}/{y}",
                            f"{months[m - 1]} {d}, {y}", f"{d} {months[m - 1]} {y}", f"{y}年{m}月{d}日"])  # fmt: skip
        cue = rng.choice(["DOB: {}", "I was born on {}.", "Geburtsdatum: {}", "date of birth {}", "née le {}",
                          "дата рождения {}", "生年月日：{}", "fecha de nacimiento: {}", "Born {} in Leeds."])  # fmt: skip
        out.append(("date_of_birth", value, cue.format(value)))
    for _ in range(per_category):
        kind = rng.randrange(4)
        if kind == 0:
            value = rng.choice("CFGHJK") + "".join(rng.choice("CFGHJKLMNPRTVWXYZ0123456789") for _ in range(8))
            text = rng.choice(["Reisepassnummer: {}", "my passport number is {}", "Passport No. {}"]).format(value)
        elif kind == 1:
            body = _digits(rng, 11)
            value = body + verhoeff.calc_check_digit(body) if rng.random() < 0.5 else _digits(rng, 12)
            value = " ".join(value[i : i + 4] for i in (0, 4, 8))
            text = rng.choice(["Aadhaar {}", "my aadhaar number is {}"]).format(value)
        elif kind == 2:
            value = f"{rng.randint(100, 899)}-{rng.randint(10, 99)}-{rng.randint(1000, 9999)}"
            text = rng.choice(["SSN {}", "social security number {}"]).format(value)
        else:
            value = _digits(rng, 11)
            text = rng.choice(["PESEL: {}", "numer PESEL {}"]).format(value)
        out.append(("national_id", value, text))
    for _ in range(per_category):
        kind = rng.randrange(3)
        alphabet = string.ascii_letters + string.digits
        if kind == 0:
            value = "".join(rng.choice(alphabet) for _ in range(12)) + "!"
            text = f"{rng.choice(['DB_PASSWORD', 'SMTP_PASS', 'REDIS_PASSWORD', 'APP_SECRET'])}={value}"
        elif kind == 1:
            value = "".join(rng.choice(alphabet + "/+") for _ in range(40))
            text = rng.choice(["aws secret {}", "the key is {} ok", "{}"]).format(value)
        else:
            value = "".join(rng.choice(alphabet) for _ in range(rng.randint(8, 14)))
            text = rng.choice(["my password is {}", "Passwort: {}", "pwd={}"]).format(value)
        out.append(("secret", value, text))
    for _ in range(per_category):
        kind = rng.randrange(5)
        if kind == 0:
            value = rng.choice([f"+44 20 {_digits(rng, 4)} {_digits(rng, 4)}", f"+49 30 {_digits(rng, 8)}",
                                f"+33 1 {_digits(rng, 2)} {_digits(rng, 2)} {_digits(rng, 2)} {_digits(rng, 2)}",
                                f"+7 495 {_digits(rng, 3)}-{_digits(rng, 2)}-{_digits(rng, 2)}",
                                f"+81 3 {_digits(rng, 4)} {_digits(rng, 4)}", f"+86 10 {_digits(rng, 4)} {_digits(rng, 4)}"])  # fmt: skip
        elif kind == 1:
            value = f"({rng.randint(201, 989)}) {rng.randint(200, 999)}-{rng.randint(1000, 9999)}"
        elif kind == 2:
            value = f"0{rng.randint(30, 89)} {_digits(rng, 8)}"
        else:
            value = f"{rng.randint(201, 989)}{rng.randint(200, 999)}{rng.randint(1000, 9999)}"
        text = rng.choice(
            ["call me on {}", "Tel. {}", "mobile: {}", "Телефон {}", "电话 {}", "Rufen Sie {} an"]
        ).format(value)
        out.append(("phone", value, text))
    for _ in range(per_category):
        n = rng.randint(2, 180)
        value = rng.choice([
            f"{n} {rng.choice(['Maple', 'Harbor', 'Elm', 'Kingsley'])} {rng.choice(['Street', 'Avenue', 'Road'])}",
            f"{rng.choice(['Lindenstraße', 'Bergweg', 'Schillerplatz'])} {n}, {rng.randint(10000, 99999)} Köln",
            f"{n} rue {rng.choice(['Victor Hugo', 'de Rivoli', 'Lafayette'])}, {rng.randint(10000, 95999)} Lyon",
            f"ul. {rng.choice(['Piękna', 'Floriańska', 'Mickiewicza'])} {n}, {rng.randint(10, 99)}-{rng.randint(100, 999)} Kraków",
            f"ул. {rng.choice(['Пушкина', 'Садовая', 'Мира'])}, д. {n}, кв. {rng.randint(1, 300)}",
            f"〒{rng.randint(100, 999)}-{rng.randint(1000, 9999)} 東京都新宿区西新宿{rng.randint(1, 8)}-{rng.randint(1, 30)}-{rng.randint(1, 20)}",
            f"上海市浦东新区世纪大道{n}号",
        ])  # fmt: skip
        out.append(
            ("address", value, rng.choice(["Ship to {}.", "Address: {}", "Wohnhaft: {}", "住所：{}"]).format(value))
        )
    for _ in range(per_category):
        user = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 9)))
        value = f"{user}@{rng.choice(['mail.example', 'firma.de', 'почта.рф', 'corp.co.jp'])}"
        out.append(("email", value, rng.choice(["Write to {}", "E-Mail: {}", "邮箱 {}"]).format(value)))
    for _ in range(per_category):
        body = _digits(rng, 15)
        value = body + luhn.calc_check_digit(body)
        value = " ".join(value[i : i + 4] for i in range(0, 16, 4))
        out.append(("credit_card", value, rng.choice(["card {}", "Kartennummer {}", "카드 {}"]).format(value)))
    return out


def measure(seed: int, per_category: int) -> dict:
    rng = random.Random(seed)
    cases = planted(rng, per_category)
    benign = [_fill(rng.choice(BENIGN), rng) for _ in range(per_category * 4)]
    removed, flagged, caught_miss, misses = defaultdict(list), defaultdict(list), defaultdict(list), []
    started = time.perf_counter()
    for category, value, text in cases:
        cleaned = PiiRemover().remove(text)  # a remover per record: no name remembered from another record
        gone = value not in cleaned
        removed[category].append(gone)
        start = text.index(value)
        hit = any(f.start < start + len(value) and f.end > start for f in find_pii(text))
        flagged[category].append(hit)
        if not gone:
            caught_miss[category].append(bool(find_pii(cleaned)))
            misses.append((category, text, cleaned))
    remover = PiiRemover()
    changed = [t for t in benign if remover.remove(t) != t]
    detected = [t for t in benign if find_pii(t)]
    return {
        "seed": seed, "per_category": per_category, "seconds": time.perf_counter() - started,
        "removed": {c: (sum(v), len(v)) for c, v in removed.items()},
        "flagged": {c: (sum(v), len(v)) for c, v in flagged.items()},
        "caught_miss": {c: (sum(v), len(v)) for c, v in caught_miss.items()},
        "benign": len(benign), "changed": changed, "detected": detected, "misses": misses,
    }  # fmt: skip


def report(r: dict) -> str:
    def share(pair):
        return f"{pair[0]}/{pair[1]} ({pair[0] / pair[1]:.0%})" if pair[1] else "-"

    lines = [
        f"# PII removal on a planted set (seed {r['seed']}, {r['per_category']} values per category)", "",
        "Built and measured by `bench/pii_planted.py` (values drawn at random in 12 languages; see its docstring).", "",
        "| category | remover removed | detector flags (raw text) | remover's misses the detector catches |",
        "|---|---|---|---|",
    ]  # fmt: skip
    for category in r["removed"]:
        lines.append(f"| {category} | {share(r['removed'][category])} | {share(r['flagged'][category])} | "
                     f"{share(r['caught_miss'].get(category, (0, 0)))} |")  # fmt: skip
    total = [sum(v[i] for v in r["removed"].values()) for i in (0, 1)]
    both = sum(v[0] for v in r["caught_miss"].values())
    lines += [
        "", f"All categories: the remover removed {share(tuple(total))}; of the {total[1] - total[0]} it missed, the "
        f"detector (run before storing: those records are quarantined) caught {both}, so "
        f"{total[1] - total[0] - both} value(s) of {total[1]} would be stored.", "",
        f"Benign look-alikes ({r['benign']} texts): the remover changed {len(r['changed'])}, the detector flagged "
        f"{len(r['detected'])} (records it would quarantine).", "",
    ]  # fmt: skip
    if r["changed"] or r["detected"]:
        lines += ["False positives (first 10 of each):", ""]
        lines += [f"- remover: `{t}`" for t in r["changed"][:10]] + [f"- detector: `{t}`" for t in r["detected"][:10]]
        lines.append("")
    if r["misses"]:
        lines += ["Missed by the remover (first 15):", ""]
        lines += [f"- {c}: `{t}` -> `{cleaned}`" for c, t, cleaned in r["misses"][:15]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--per-category", type=int, default=60)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "pii_planted.md")
    args = parser.parse_args()
    text = report(measure(args.seed, args.per_category))
    args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
