"""The rules of shadow.pii that read a value's context, in many languages and scripts:

- person: a name after a cue that introduces one ("my name is", "меня зовут", "我叫", "اسمي", "με λένε", a title,
  a salutation) in any script; a name before an honorific (王小明先生, 田中さん, 김민수씨); two or three title-case
  words of a cased script other than Latin (Иван Петров, Γιώργος Παπαδόπουλος), where an English NER model
  sees nothing;
- date_of_birth: a date in any common format (2001-02-03, 03.02.2001, 3 February 2001, February 3, 2001,
  2001年2月3日) after a cue that says it is one ("born", "DOB", "geboren", "né le", "дата рождения", "生年月日");
- national_id: an identifier of any country after a cue that names it (passport, Reisepass, Aadhaar, PESEL,
  паспорт, 身份证, ...), with or without a valid checksum;
- secret: `KEY=value` and `key: value` where the key names a secret (DB_PASSWORD, AWS_SECRET_ACCESS_KEY,
  client_secret, ...), and long random-looking tokens (upper and lower case mixed with digits, 20 characters or
  more, high entropy: an API key or a cloud secret key);
- address: street addresses of more countries (Poland, Russia, Greece, Japan, China, Arab countries);
- numbers: whether a number the phone library accepts is a phone, from its format and its context (an order,
  ticket or invoice number, a version, an epoch time are not; a cue word or a phone's punctuation says it is).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator

import regex

# --- names --------------------------------------------------------------------------------------------------
_NAME_CUES = (
    # en
    r"my name is|my name's|i am|i'm|this is|name\s*:|named|called|dear|hi|hello|regards,|thanks,|sincerely,"
    r"|mr\.?|mrs\.?|ms\.?|miss|dr\.?|prof\.?|patient|customer|client|employee|contact|signed,?|attn\.?:?"
    r"|call|ask|tell|cc:?|forward(?:ed)? to|assigned to|signed by|written by|reported by|approved by|sent by"
    # de, fr, es, it, pt, nl, pl, tr
    r"|ich heiße|ich heisse|mein name ist|ich bin|herr|frau|liebe|lieber|sehr geehrte[r]?|grüße,|gruß,"
    r"|je m'appelle|je m’appelle|mon nom est|je suis|nom\s*:|monsieur|madame|mme\.?|m\.|cher|chère|cordialement,"
    r"|me llamo|mi nombre es|soy|señor|señora|sr\.|sra\.|estimad[oa]|nombre\s*:"
    r"|mi chiamo|il mio nome è|sono|signor[ae]?|sig\.(?:ra)?|gentile|car[oa]|nome\s*:"
    r"|meu nome é|chamo-me|eu sou|senhora?"
    r"|mijn naam is|ik heet|ik ben|meneer|mevrouw|naam\s*:"
    r"|nazywam się|mam na imię|jestem|pan|pani|imię\s*:"
    r"|benim adım|adım|ad\s*:"
    # ru, uk, el, ar
    r"|меня зовут|мене звати|моё имя|мое имя|моє ім'я|я|зовут|имя\s*:|господин|госпожа|уважаем(?:ый|ая)|шановн(?:ий|а)"
    r"|με λένε|ονομάζομαι|το όνομά μου είναι|είμαι|κύριος|κυρία|κ\.|αγαπητ(?:έ|ή)"
    r"|اسمي|أنا|انا|السيد|السيدة|الاسم\s*:|إلى|الى"
    # zh, ja, ko, hi
    r"|我叫|我的名字是|我的名字叫|我是|名字[:：]|姓名[:：]|联系人[:：]?|联系|请找|交给|转给|告诉"
    r"|私の名前は|私は|わたしは|名前は|氏名[:：]|担当[:：]?"
    r"|제 이름은|저는|이름[:：]"
    r"|मेरा नाम|मैं"
)

# the commonest Chinese surnames: where a name starts in unspaced Chinese text (王小明先生, 请转给陈敏女士)
_SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖"
    "贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"
)
# after a cue: 1-3 words that start upper-case (any cased script), 2-4 Han / kana characters (or a common
# surname and 1-2 more), 2-4 Hangul syllables, or 1-2 Arabic or Devanagari words
_NAME_AFTER_CUE = regex.compile(
    # a cue starts a word, except in the unspaced scripts (请联系王伟: the cue follows a letter there)
    rf"(?i:(?<![^\W\p{{Han}}\p{{Hiragana}}\p{{Katakana}}\p{{Hangul}}])(?:{_NAME_CUES}))[ \t:：,]*"
    r"(?P<name>(?-i:\p{Lu}[\p{Ll}\p{Lm}'’-]*\.?(?:[ \t]+(?:\p{Lu}[\p{Ll}\p{Lm}'’-]*\.?"
    r"|(?:van|von|de|da|di|del|der|la|le|bin|ibn|al)(?=[ \t]+\p{Lu}))){0,3})"
    r"|[\p{Han}\p{Katakana}ー・]{2,4}(?=[\p{Hiragana}\s\p{P}]|$|先生|女士|小姐|様|さん)"
    rf"|[{_SURNAMES}]\p{{Han}}{{1,2}}"  # unspaced Chinese: from a common surname, the name's usual length
    r"|\p{Hangul}{2,4}?(?=입니다|이에요|예요|이고|씨|님|[\s\p{P}]|$)"
    r"|\p{Arabic}{2,}(?:[ \t]+\p{Arabic}{2,})?"
    r"|\p{Devanagari}{2,}(?:[ \t]+\p{Devanagari}{2,})?)"
)
_HONORIFIC = regex.compile(
    rf"(?P<name>[{_SURNAMES}]\p{{Han}}{{1,2}}?)(?=先生|女士|小姐|老师|醫生|医生|经理|總|总)"
    r"|(?P<name>(?<![\p{Han}])\p{Han}{2,4})(?=さん|様|さま|くん|ちゃん|氏|殿|先生)"
    r"|(?P<name>(?<!\p{Hangul})\p{Hangul}{2,4})(?=씨|님)"
)
# two or three title-case words of a cased script other than Latin (an English NER model reads none of them)
_CASED_NON_LATIN = regex.compile(
    r"(?<![\p{L}])(?P<name>[\p{Cyrillic}\p{Greek}\p{Armenian}&&\p{Lu}][\p{Cyrillic}\p{Greek}\p{Armenian}&&\p{Ll}]+"
    r"(?:[ \t]+[\p{Cyrillic}\p{Greek}\p{Armenian}&&\p{Lu}][\p{Cyrillic}\p{Greek}\p{Armenian}&&\p{Ll}]+){1,2})"
    r"(?![\p{L}])",
    regex.V1,
)
# determiners and possessives of the languages an English NER model misreads (German nouns are capitalized:
# "Ihre Bestellnummer" is tagged as a person): a name holds none of them
FUNCTION_WORDS = {
    "ihre", "ihr", "mein", "meine", "dein", "deine", "unser", "unsere", "der", "die", "das", "den", "dem", "des",
    "ein", "eine", "einen", "les", "un", "une", "votre", "notre", "mon", "ma", "mes", "el", "los", "las", "su",
    "sus", "il", "lo", "gli", "uno", "una", "het", "een", "uw", "onze", "os", "seu", "sua", "the", "your", "our",
    "my", "this", "that", "sie", "wir", "ich", "du", "er", "es", "vous", "nous", "usted", "ustedes", "bitte",
}  # fmt: skip
# what follows a field's label: "Email: ...", "Tel. +44 ..." (a word there names the field, not a person)
FIELD_LABEL = regex.compile(r"\s*:|\.\s*[+\d(]")
# what follows a salutation or "I am" but names nobody
_NOT_NAMES = {
    "team", "all", "everyone", "everybody", "sir", "madam", "there", "world", "friend", "friends", "colleagues",
    "customer", "support", "guys", "folks", "again", "sorry", "sure", "fine", "glad", "happy", "here", "back",
    "not", "the", "a", "an", "it", "just", "so", "very", "also", "still", "using", "trying", "looking", "going",
    "i", "ok", "okay", "yes", "no", "thanks", "thank", "please", "hope", "wondering",
}  # fmt: skip


def names(text: str) -> Iterator[tuple[int, int]]:
    """Spans of person names that a context says are names (see the module docstring)."""
    for m in _NAME_AFTER_CUE.finditer(text):
        name = m.group("name").rstrip(".")
        words = name.split()
        while words and words[-1].lower() in _NOT_NAMES:
            words.pop()
        if words and words[0].lower() not in _NOT_NAMES:
            start = m.start("name")
            yield start, start + len(" ".join(words)) if len(words) > 1 else start + len(words[0])
    for m in _HONORIFIC.finditer(text):
        yield m.start("name"), m.end("name")
    for m in _CASED_NON_LATIN.finditer(text):
        yield m.start("name"), m.end("name")


# --- dates of birth -----------------------------------------------------------------------------------------
_BIRTH_CUES = (
    r"born(?: on| in)?|date of birth|birth ?date|birthday|d\.?o\.?b\.?|geboren(?: am)?|geb\.|geburtsdatum"
    r"|né le|née le|né|née|date de naissance|fecha de nacimiento|nacid[oa](?: el)?|data di nascita|nat[oa] il"
    r"|data de nascimento|nascid[oa] em|data urodzenia|urodzon[ya]|geboortedatum|geboren op|doğum tarihi"
    r"|дата рождения|родил(?:ся|ась)|дата народження|ημερομηνία γέννησης|γεννήθηκα|生年月日|出生日期|出生于|出生於"
    r"|生日|誕生日|생년월일|تاريخ الميلاد|ولدت في|ولد في|जन्म तिथि"
)
_MONTHS = (
    r"jan(?:uary|uar|vier|\.)?|feb(?:ruary|ruar|\.)?|février|mar(?:ch|\.)?|märz|mars|apr(?:il|\.)?|avril|may|mai"
    r"|jun(?:e|i|\.)?|juin|jul(?:y|i|\.)?|juillet|aug(?:ust|\.)?|août|sep(?:t|tember|\.)?|septembre"
    r"|oct(?:ober|\.)?|okt(?:ober)?|octobre|nov(?:ember|embre|\.)?|dec(?:ember|\.)?|dez(?:ember)?|décembre"
    r"|enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|octubre|noviembre|diciembre"
    r"|gennaio|febbraio|aprile|maggio|giugno|luglio|settembre|ottobre|dicembre"
    r"|января|февраля|марта|апреля|мая|июня|июля|августа|сентября|октября|ноября|декабря"
)
DATE_SHAPES = (  # a date written in any common format (the months of several languages)
    r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.](?:\d{4}|\d{2})"
    rf"|\d{{1,2}}(?:st|nd|rd|th|er|\.)?[ \t]+(?:of[ \t]+)?(?:{_MONTHS})[ \t,]+\d{{4}}"
    rf"|(?:{_MONTHS})[ \t]+\d{{1,2}}(?:st|nd|rd|th)?,?[ \t]+\d{{4}}"
    r"|\d{4}[ \t]?年[ \t]?\d{1,2}[ \t]?月[ \t]?\d{1,2}[ \t]?日|\d{4}\.[ \t]?\d{1,2}\.[ \t]?\d{1,2}\.?"
    rf"|\d{{1,2}}[-/](?:{_MONTHS})[-/](?:\d{{4}}|\d{{2}})|(?:19|20)\d{{2}}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
)
_BIRTH_DATE = regex.compile(
    rf"(?i:(?<![\p{{L}}])(?:{_BIRTH_CUES}))[^\d\n]{{0,25}}?(?P<date>(?i:{DATE_SHAPES}))", regex.IGNORECASE
)


def dates_of_birth(text: str) -> Iterator[tuple[int, int]]:
    for m in _BIRTH_DATE.finditer(text):
        yield m.start("date"), m.end("date")


# --- identifiers named by their context ---------------------------------------------------------------------
_ID_CUES = (
    r"passport|passport no|reisepass(?:nummer)?|pass-?nr|passnummer|personalausweis(?:nummer)?|ausweis(?:nummer)?"
    r"|passeport|pasaporte|passaporto|passaporte|paszport|pasaport|паспорт|διαβατήριο|护照|護照|パスポート|여권"
    r"|جواز(?: السفر)?|aadhaar|aadhar|ssn|social security(?: number)?|national id|national insurance|identity card"
    r"|id card|id number|id no|identity number|tax id|tax number|steuer-?id|steueridentifikationsnummer|nir"
    r"|numéro de sécurité sociale|sécurité sociale|dni|nie|nif|codice fiscale|pesel|nip|cpf|rg|sin|nhs number"
    r"|bsn|personnummer|инн|снилс|身份证(?:号码?)?|身分證|マイナンバー|주민등록번호|رقم الهوية|driver'?s licen[cs]e"
    r"|licen[cs]e number|führerschein(?:nummer)?"
)
_ID_VALUE = r"[A-Z]{0,3}\d[\dA-Z]*(?:[ \-./]\d[\dA-Z]*){0,5}|[A-Z]{1,3}[ \-]?\d[\dA-Z]*"
_ID_AFTER_CUE = regex.compile(
    rf"(?i:(?<![\p{{L}}])(?:{_ID_CUES}))(?:[\s:：#.,-]|(?i:no|nr|number|num|nummer|numéro|número|numero|is|ist|est|es|号码|番号))*"
    rf"(?P<id>{_ID_VALUE})(?![\w])"
)


_PASSPORT = regex.compile(
    r"(?i:(?<![\p{L}])(?:passport|reisepass|pass-?nr|passnummer|passeport|pasaporte|passaporto|passaporte|paszport"
    r"|pasaport|паспорт|διαβατήριο|护照|護照|パスポート|여권|جواز))[\p{L}\s:：#.,-]{0,20}?"
    r"(?P<id>(?=[A-Z]*\d)[A-Z0-9]{6,12}|[CFGHJKLMNPRTVWXYZ]{9})"  # a German one may hold no digit (no vowel)
    r"(?![\w])"
)


def identifiers(text: str) -> Iterator[tuple[int, int]]:
    """An identifier after a cue that names it: at least 4 digits (an id of any country), or for a passport
    any code of 6-12 capitals and digits (German passports hold letters: C01X00T47)."""
    for m in _ID_AFTER_CUE.finditer(text):
        if sum(c.isdigit() for c in m.group("id")) >= 4:
            yield m.start("id"), m.end("id")
    for m in _PASSPORT.finditer(text):
        yield m.start("id"), m.end("id")


# --- secrets ------------------------------------------------------------------------------------------------
_KEY_VALUE = regex.compile(
    r"(?i)(?<![A-Za-z0-9])[A-Za-z0-9_.-]*(?:password|passwd|passwort|pass|pwd|secret|token|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|credentials?|auth[_-]?key|session[_-]?key)[A-Za-z0-9_.-]*[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?P<value>[^\s\"',;]+)"
)
_TOKEN = regex.compile(r"(?<![A-Za-z0-9+/=_.:-])[A-Za-z0-9+/=_-]{20,}(?![A-Za-z0-9+/=_-])")


PRIVATE_KEY_BLOCK = regex.compile(
    r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----.*?(?:-----END (?:[A-Z]+ )*PRIVATE KEY-----|$)", regex.DOTALL
)


def secrets(text: str) -> Iterator[tuple[int, int]]:
    for m in PRIVATE_KEY_BLOCK.finditer(text):  # a PEM private key, to its end (or the text's, when cut off)
        yield m.start(), m.end()
    for m in _KEY_VALUE.finditer(text):
        if m.group("value") not in ("[REDACTED]", "[secret]"):
            yield m.start("value"), m.end("value")
    for m in _TOKEN.finditer(text):
        token = m.group()
        if random_looking(token) and "://" not in text[max(0, m.start() - 12) : m.start()]:
            yield m.start(), m.end()


def random_looking(token: str) -> bool:
    """Upper and lower case mixed with digits, and high entropy: a key, not a word or a CamelCase name."""
    kinds = (any(c.isupper() for c in token), any(c.islower() for c in token), any(c.isdigit() for c in token))
    if not all(kinds):
        return False
    counts = Counter(token)
    entropy = -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())
    return entropy >= 3.5


# --- addresses ----------------------------------------------------------------------------------------------
_ADDRESSES = [
    # Poland: ul. Marszałkowska 10/12, 00-590 Warszawa
    regex.compile(
        r"(?i:(?<![\p{L}])(?:ul\.|ulica|al\.|aleja|aleje|pl\.|plac|os\.|osiedle))[ \t]+(?:\p{Lu}[\p{L}.-]*[ \t]+){1,3}"
        r"\d{1,4}[a-zA-Z]?(?:/\d{1,4})?(?:,?[ \t]*\d{2}-\d{3}[ \t]+\p{Lu}\p{Ll}+)?"
    ),
    regex.compile(r"(?<![\d-])\d{2}-\d{3}[ \t]+\p{Lu}\p{Ll}{2,}"),  # a Polish postcode and its town
    # Russia / Ukraine: ул. Ленина, д. 5, кв. 12
    regex.compile(
        r"(?i:(?<![\p{L}])(?:ул\.|улица|вул\.|вулиця|пр\.|проспект|пр-т|пер\.|переулок|бульвар|б-р|шоссе|наб\.|"
        r"набережная|пл\.|площадь))[ \t]*\p{Lu}[\p{L}.-]*(?:[ \t]+\p{L}[\p{L}.-]*){0,2},?[ \t]*(?:(?i:д\.|дом)[ \t]*)?"
        r"\d{1,4}[а-яa-z]?(?:,?[ \t]*(?i:корп\.|стр\.|кв\.|квартира|офис)[ \t]*\d{1,4})*"
    ),
    # Greece: οδός Ερμού 15, Λεωφόρος Κηφισίας 100; a street and its postcode (Ερμού 15, 105 63 Αθήνα)
    regex.compile(
        r"(?i:(?<![\p{L}])(?:οδός|οδ\.|λεωφόρος|λεωφ\.))[ \t]+\p{Lu}\p{L}+(?:[ \t]+\p{L}+){0,2}[ \t]+\d{1,4}"
    ),
    regex.compile(r"\p{Lu}\p{Ll}+[ \t]+\d{1,4},[ \t]*\d{3}[ \t]?\d{2}(?:[ \t]+\p{Lu}\p{Ll}+)?"),
    # Japan: 〒100-0005 東京都千代田区丸の内1-1-1; China: 北京市朝阳区建国路88号
    regex.compile(r"〒[ \t]?\d{3}-?\d{4}"),
    regex.compile(
        r"[\p{Han}\p{Katakana}\p{Hiragana}ー]{1,12}?[都道府県市区町村郡省县鎮镇路街巷][\p{Han}\p{Katakana}\p{Hiragana}ー]{0,15}?"
        r"(?:[0-9０-９一二三四五六七八九十百]+(?:丁目|番地|番|号|號|弄|室|楼|樓|[-－‐ー](?=[0-9０-９])))+"
        r"(?:[0-9０-９]+(?:号|號)?)?"
    ),
    # Arab countries: شارع الملك فهد 12
    regex.compile(r"شارع[ \t]+\p{Arabic}+(?:[ \t]+\p{Arabic}+){0,3}(?:[ \t]*،?[ \t]*\d{1,5})?"),
]


def addresses(text: str) -> Iterator[tuple[int, int]]:
    for pattern in _ADDRESSES:
        for m in pattern.finditer(text):
            yield m.start(), m.end()


# --- numbers: a phone, or not -------------------------------------------------------------------------------
# cue words before a number; a long cue also matches as the head of a compound (Telefonnummer, Bestellnummer,
# 订单号), a short one only as a word of its own ("no", "id", "po")
def _cues(long: str, short: str) -> regex.Pattern:
    return regex.compile(rf"(?i)(?<![\p{{L}}])(?:(?:{long})|(?:{short})(?![\p{{L}}]))")


_PHONE_CUES = _cues(
    r"phone|tele|call|calling|sms|mobil|cell|whatsapp|signal|fax|dial|reach me|my number|handy|rufnummer|anruf|rufen"
    r"|téléphone|portable|appeler|teléfono|móvil|llamar|cellulare|chiamare|telemóvel|telefoon|bellen|komórk"
    r"|телефон|звоните|позвоните|мобильн|τηλέφων|電話|电话|手机|手機|携帯|전화|핸드폰|هاتف|جوال|फ़ोन|फोन",
    r"tel\.?|text|ring|тел\.?|τηλ\.?",
)
_OTHER_NUMBER_CUES = _cues(
    r"order|ticket|invoice|reference|booking|reservation|tracking|confirmation|transaction|receipt|serial"
    r"|product|version|build|release|bestell|rechnung|auftrag|kunden|sendung|vorgang|referenz|commande|facture"
    r"|pedido|factura|ordine|fattura|заказ|счёт|счет|订单|单号|注文|주문|طلب|epoch|timestamp|unix|seconds|bytes"
    r"|isbn|issn|ean|upc|gtin|barcode|page|line|port|account|customer|member",
    r"ref\.?|case|po|sku|part|item|model|id|no\.?|nr\.?|time|date|ms|kb|mb|gb|doi|pid|uid|gid|code|#",
)


def _last_cue(pattern: regex.Pattern, before: str) -> int:
    """Where the last cue before a number starts that applies to it (no other number between), else -1."""
    last = -1
    for m in pattern.finditer(before):
        if not regex.search(r"\d", before[m.end() :]):
            last = m.start()
    return last


def is_phone(text: str, start: int, raw: str) -> bool:
    """Whether a number the phone library accepts is a phone: an international one (+...) is; else the nearest
    cue before it says so (a phone's, or an order, ticket, invoice, version or code's), else its format does
    (parentheses, or separators between digit groups). A bare run of digits with no cue (an order number, an
    epoch time) is no phone."""
    if raw.lstrip().startswith("+"):  # an international number is written for dialling
        return True
    before = text[max(0, start - 40) : start]
    phone, other = _last_cue(_PHONE_CUES, before), _last_cue(_OTHER_NUMBER_CUES, before)
    if phone > other:
        return True
    if other >= 0:
        return False
    if a_quantity(text, start, start + len(raw)):
        return False
    return raw.lstrip().startswith("(") or bool(regex.search(r"\d[ .\-/]+\d", raw.strip()))


def a_quantity(text: str, start: int, end: int) -> bool:
    """A price or a quantity (3696.21 EUR, 12 kg), or a decimal number: no phone, no identifier."""
    return bool(_UNIT_AFTER.match(text, end) or regex.fullmatch(r"\d+[.,]\d+", text[start:end].strip()))


_UNIT_AFTER = regex.compile(r"[ \t]*(?:%|€|\$|£|¥|(?i:eur|usd|gbp|chf|jpy|cny|rub|inr|kg|km|mb|gb|ms|mm|cm|m)\b)")


def other_number(text: str, start: int) -> bool:
    """Whether the nearest cue before a number says it is an order, ticket, invoice, version or code number."""
    before = text[max(0, start - 40) : start]
    return _last_cue(_OTHER_NUMBER_CUES, before) > _last_cue(_PHONE_CUES, before)


_IP_CUES = regex.compile(
    r"(?i)(?<![\p{L}])(?:ip|ipv4|address|addr|host|server|router|gateway|dns|ping|connect(?:ed|ing)?|subnet|proxy"
    r"|vpn|ssh|http|from|client|source|destination|dst|src|nameserver|firewall|modem|wifi|lan|wan)(?![\p{L}])"
)
_VERSION_CUES = regex.compile(
    r"(?i)(?<![\p{L}])(?:v|ver|version|versions|release|build|upgrade[ds]?|upgrading|update[ds]?|updating|install"
    r"(?:ed|ing)?|python|node|java|ruby|php|perl|rust|go|gcc|clang|kernel|linux|ubuntu|debian|android|ios|macos"
    r"|windows|chrome|firefox|pip|npm|package|library|lib|sdk|api|firmware|patch|to)(?![\p{L}])"
)


def is_ip(text: str, start: int, address: str) -> bool:
    """Whether a dotted quad is an IP address rather than a version (3.10.1.2): the nearest cue says so, else
    its numbers do (a version's are small; an address has a part above 31)."""
    before = text[max(0, start - 40) : start]
    ip, version = _last_cue(_IP_CUES, before), _last_cue(_VERSION_CUES, before)
    if ip > version:
        return True
    if version >= 0:
        return False
    return any(int(part) > 31 for part in address.split("."))
