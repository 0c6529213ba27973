"""Realistic model behaviours for the embedded fake model, chosen by the requested model name.

Each profile is a measured behaviour of a real model (a recipe request sent to nine
models, streamed and timed, at several times of day) written in real seconds; the fake
plays it ``time_scale`` times faster so a bench of every profile runs offline in seconds.

* ``fake-steady``: ~1,600 tokens at 18 tokens/s after 2 s (the model in production, ~90 s).
* ``fake-peak``: the same model at the evening peak, 3x slower (it no longer fits the total limit).
* ``fake-late-start``: valid, but its first content comes after 57 s (just inside the 60 s limit).
* ``fake-broken-json``: writes at the steady pace, but the JSON is broken.
* ``fake-length``: twice as fast, but spends ``max_tokens`` on reasoning and writes no content.
* ``fake-thinker``: writes ``<think>…</think>`` into the content before a valid JSON recipe.
* ``fake-evening``: the production model at the evening peak as the write-up measured one stream: first content
  after 6.2 s, ~18 tokens/s (20 while writing, a pause of up to 4.1 s every 400 tokens): ~90 s for a whole
  recipe; each stream at that speed however many are open (hosted APIs batch requests).
* ``fake-offpeak``: the same model off-peak: first content after 2-4 s, a whole recipe in 19-32 s.
* ``fake-capped``: the steady model behind a provider that caps a key's tokens/s: streams share 18 tokens/s, so
  writing sections side by side gains nothing.

A request naming a section (the ``X-Recipe-Section`` header, ``RecipeSections=parallel``) gets that section of the
same recipe (:func:`section_doc`), at the same pace.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

#: Real time per token of the production model (18 tokens/s): ``--fake-pace-ms`` is measured against it.
REAL_MS_PER_TOKEN = 1000 / 18


@dataclass(frozen=True)
class ModelProfile:
    name: str
    first_content_s: float  #: real seconds from the request to the first text
    tokens_per_s: float  #: real writing rate
    kind: str = "ok"  #: ok | broken_json | length | thinker
    think_tokens: int = 0  #: reasoning written before the JSON (``thinker``)
    description: str = ""
    #: A range instead of one figure: each request draws its first content from [first_content_s, this]…
    first_content_s_max: float | None = None
    #: … and its writing rate from [this, tokens_per_s]
    tokens_per_s_min: float | None = None
    #: the share of requests that spend ``max_tokens`` on reasoning and write no content (a ``length`` answer)
    length_share: float = 0.0
    #: a pause of up to ``pause_s_max`` (drawn) after every ``pause_every`` tokens: the gaps a busy model leaves
    pause_every: int = 0
    pause_s_max: float = 0.0
    #: the key's tokens/s over all its streams at once (None: each stream writes at its own rate)
    key_tokens_per_s: float | None = None
    #: benched by ``chuixiang bench`` without ``--models`` (the sections bench's own models are not)
    bench_default: bool = True


PROFILES: dict[str, ModelProfile] = {
    p.name: p
    for p in (
        ModelProfile("fake-steady", 2.0, 18.0, description="~1,600 tokens at 18 tokens/s"),
        ModelProfile("fake-peak", 6.0, 6.0, description="the same model at the evening peak, 3x slower"),
        ModelProfile("fake-late-start", 57.0, 30.0, description="first content after 57 s"),
        ModelProfile("fake-broken-json", 2.0, 18.0, kind="broken_json", description="invalid JSON"),
        ModelProfile("fake-length", 1.0, 36.0, kind="length", description="max_tokens spent on reasoning"),
        ModelProfile(
            "fake-evening",
            6.2,
            20.0,
            pause_every=400,
            pause_s_max=4.1,
            description="the evening peak: first content 6.2 s, ~18 tokens/s with pauses up to 4.1 s",
            bench_default=False,
        ),
        ModelProfile(
            "fake-offpeak",
            2.0,
            1600 / 19,
            first_content_s_max=4.0,
            tokens_per_s_min=1600 / 32,
            description="off-peak: first content 2-4 s, ~1,600 tokens in 19-32 s",
            bench_default=False,
        ),
        ModelProfile(
            "fake-capped",
            2.0,
            18.0,
            key_tokens_per_s=18.0,
            description="a key capped at 18 tokens/s over its streams",
            bench_default=False,
        ),
        ModelProfile(
            "fake-thinker",
            2.0,
            24.0,
            kind="thinker",
            think_tokens=200,
            description="<think>…</think> in the content, then the JSON",
        ),
    )
}

_STEPS = [
    "把{dish}的主料用流动的清水冲洗干净，去掉表面的杂质和多余的水分，切成大小均匀、约两厘米见方的块，"
    "这样受热一致，成熟的时间也更好把握，切好后放在盘中沥干备用；水分沥得越干，下锅时越不容易溅油，表面也更容易上色，成菜的颜色会更好看，味道也更容易挂住，这一步多花两分钟很值得。",
    "葱洗净后切成三厘米长的段，葱白和葱绿分开放；姜去皮切成薄片，蒜拍碎去皮；把盐、生抽、白糖和清水提前"
    "调成一碗料汁，炒的时候一次倒入，就不会手忙脚乱，也不会因为找调料而炒过火；料汁里的白糖要先搅到完全溶化，否则会沉在碗底，最后只有一口是甜的；生抽的咸度各家不同，先少放，出锅前再尝一次，宁淡勿咸，咸了很难补救。",
    "鸡蛋磕入碗中，加入一小撮盐和几滴清水，用筷子顺着一个方向快速搅打一分钟，直到蛋液表面起一层细密的小泡，"
    "这样炒出来的鸡蛋更蓬松，口感也更嫩滑；如果想更嫩，可以再加一小勺水淀粉，蛋液遇热凝固得慢一些，不容易炒老；打好的蛋液不要久放，静置太久泡沫消失，炒出来就不够蓬松了，最好现打现炒。",
    "炒锅烧到冒出轻烟后倒入两大勺油，转动锅身让油均匀挂满锅壁，油温六成热时倒入蛋液，先不要翻动，"
    "等边缘凝固、中间还略带流动时用铲子轻轻推散，炒到刚刚凝固立即盛出；这时鸡蛋还会被余温继续加热，所以看起来略湿正好，等回锅时再和主料一起炒熟；盛出的鸡蛋摊开放，不要堆在一起，否则底下的会被闷老，口感发柴。",
    "锅中留少许底油，放入葱白、姜片和蒜碎，用中小火煸炒出香味，注意不要炒焦，然后转大火放入主料，"
    "快速翻炒两分钟，让主料表面微微变软、出汁，香味和锅气一起出来；火力不够时宁可分两次下锅，一次放太多，锅温一降主料就会出水变成煮；翻炒时锅铲贴着锅底推，让每一块主料都能接触到热锅，受热均匀才会有锅气。",
    "沿着锅边淋入调好的料汁，翻炒均匀后盖上锅盖焖一分钟，让主料充分吸收汤汁的味道；如果汤汁太多，"
    "可以开大火收一收，保留少量汤汁拌饭更香；焖的时候留意锅底，听到滋滋声变小就是汤汁快收干了，及时转小火以免糊锅；喜欢浓稠口感的，可以在这一步沿锅边淋入少许水淀粉，推匀后汤汁会变得透亮，拌饭尤其好吃。",
    "倒回炒好的鸡蛋，和主料一起快速翻炒十几秒，让鸡蛋裹上汤汁，撒入葱绿，尝一下咸淡，按口味补一点盐或糖，"
    "翻匀后立刻关火，利用余温把葱绿烫出香味；鸡蛋回锅后不要再久炒，十几秒足够，炒久了鸡蛋会吸干汤汁，口感变得干硬；最后淋几滴香油提香，香油怕热，一定要关火后再放，几滴就够。",
    "出锅装入温热的盘中，趁热上桌，配一碗白米饭最好；吃不完的放凉后加盖冷藏，第二天回锅时加一勺清水，"
    "小火加热即可，不要反复加热，以免鸡蛋变老；隔夜的菜一定要完全冷却后再放进冰箱，并在一天之内吃完；带饭的话，鸡蛋和主料分开装，吃之前再一起加热，口感会好很多，也不容易变味。",
]


#: Short titles of the steps (the outline of a recipe written in sections), one per step of ``_STEPS``.
_TITLES = ["洗切主料", "调好料汁", "打散鸡蛋", "滑炒鸡蛋", "爆香下主料", "淋汁焖煮", "回锅合炒", "装盘保存"]


def long_recipe_for(dish: str) -> dict[str, Any]:
    """A full-length recipe (8 detailed steps, an image prompt of ~90 words): about 1,600 tokens."""
    prompt_words = (
        "An overhead photograph of {dish}, a home-style Chinese dish served on a round white porcelain "
        "plate, glossy sauce clinging to tender pieces, soft scrambled egg folded through, scattered "
        "green scallion, a few slices of ginger, steam rising gently, natural window light from the "
        "left, warm tones, a rustic wooden table, a bowl of steamed rice and chopsticks beside the "
        "plate, shallow depth of field, crisp focus on the food, appetising, realistic food "
        "photography, high detail, no text, no watermark, no people, square composition."
    )
    return {
        "name": dish,
        "summary": f"{dish}是一道经典的家常菜，食材易得、做法简单，咸鲜适口、略带回甜，十五分钟就能上桌，"
        "下饭又营养，是工作日晚餐的好选择。",
        "ingredients": {
            "main": [{"name": f"{dish}主料", "amount": "300克"}, {"name": "鸡蛋", "amount": "3个"}],
            "auxiliary": [
                {"name": "葱", "amount": "2根"},
                {"name": "姜", "amount": "3片"},
                {"name": "蒜", "amount": "2瓣"},
            ],
            "seasoning": [
                {"name": "盐", "amount": "3克"},
                {"name": "生抽", "amount": "1勺"},
                {"name": "白糖", "amount": "5克"},
                {"name": "食用油", "amount": "30毫升"},
            ],
        },
        "stepTitles": list(_TITLES),
        "steps": [{"order": i + 1, "text": text.format(dish=dish)} for i, text in enumerate(_STEPS)],
        "pairings": {"side": "凉拌黄瓜", "soup": "紫菜蛋花汤", "staple": "白米饭", "drink": "大麦茶"},
        "nutrition": {"caloriesKcal": 420, "proteinG": 22, "fatG": 26, "carbsG": 18},
        "imagePrompt": prompt_words.format(dish=dish),
    }


#: The keys of each section's answer (a ``steps:<from>-<to>`` section answers its range of ``steps``).
SECTION_KEYS = {
    "extras": ("pairings", "nutrition"),
    "imagePrompt": ("imagePrompt",),
}


def section_doc(recipe: dict[str, Any], section: str | None) -> dict[str, Any]:
    """What a model writes for ``section`` of ``recipe`` (None: the whole recipe, without the outline's titles)."""
    if section is None:
        return {k: v for k, v in recipe.items() if k != "stepTitles"}
    if section.startswith("steps:"):
        first, _, last = section.removeprefix("steps:").partition("-")
        return {"steps": [s for s in recipe["steps"] if int(first) <= s["order"] <= int(last)]}
    if section == "outline":  # flat, in the order asked for: what the steps need first, the summary last
        groups = recipe["ingredients"]
        return {
            "name": recipe["name"],
            "main": groups["main"],
            "stepTitles": recipe["stepTitles"],
            "auxiliary": groups["auxiliary"],
            "seasoning": groups["seasoning"],
            "summary": recipe["summary"],
        }
    return {k: recipe[k] for k in SECTION_KEYS.get(section, ())}


#: An English word with the space before it: one token, as byte-pair encodings make of common words.
_WORD = re.compile(r" ?[A-Za-z]+")


def token_pieces(text: str) -> list[str]:
    """``text`` cut as a tokenizer would stream it: an English word (with its space) a token, the Chinese and
    the JSON punctuation 1 or 2 characters at a time (the full-length recipe: ~1,600 tokens)."""
    pieces, i, n = [], 0, 0
    while i < len(text):
        word = _WORD.match(text, i)
        if word:
            pieces.append(word.group())
            i = word.end()
            continue
        size = 2 if n % 5 == 3 else 1
        pieces.append(text[i : i + size])
        i += size
        n += 1
    return pieces


def profile_text(profile: ModelProfile, dish: str, section: str | None = None) -> str:
    """The content a profile writes (``length`` writes reasoning instead, see the fake)."""
    text = json.dumps(section_doc(long_recipe_for(dish), section), ensure_ascii=False)
    if profile.kind == "broken_json":
        return text.replace('"steps": [', '"steps": [[', 1)  # an unclosed array: not JSON
    if profile.kind == "thinker":
        thought = "先确定主料和辅料，再按下锅顺序排列步骤，注意火候和调味的先后。" * 10
        return f"<think>{thought[: profile.think_tokens]}</think>\n{text}"
    return text
