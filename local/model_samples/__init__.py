"""What models write and draw, as samples: a short recipe for any dish, the largest the recipe stage keeps, a
full-length one (~1,600 tokens), what a model writes for each section of one, a text cut into the pieces a
tokenizer streams, and real PNG pictures. The runner's fake model serves them; the product's tests read them. A
package of its own, neither the product nor the runner.
"""

from __future__ import annotations

import json
import random
import re
import struct
import zlib
from typing import Any


def recipe_for(dish: str) -> dict[str, Any]:
    """A plausible, schema-valid recipe for any dish name."""
    return {
        "name": dish,
        "summary": f"{dish}是一道家常菜，做法简单，味道鲜美，适合工作日的晚餐。",
        "ingredients": {
            "main": [{"name": f"{dish}主料", "amount": "300克"}, {"name": "鸡蛋", "amount": "2个"}],
            "auxiliary": [{"name": "葱", "amount": "1根"}, {"name": "姜", "amount": "3片"}],
            "seasoning": [{"name": "盐", "amount": "3克"}, {"name": "生抽", "amount": "1勺"}],
        },
        "steps": [
            {"order": i + 1, "text": text}
            for i, text in enumerate(
                [
                    f"把{dish}的主料洗净，切成均匀的小块，沥干水分备用。",
                    "葱切段，姜切片，调料提前放在手边，炒的时候不手忙脚乱。",
                    "鸡蛋打散，加一小撮盐，搅打到蛋液表面起细泡。",
                    "锅烧热后倒油，油温六成热时下蛋液，凝固后盛出。",
                    "锅中留底油，下葱姜爆香，再下主料大火翻炒两分钟。",
                    "加入生抽和盐调味，倒回鸡蛋，翻炒均匀后出锅装盘。",
                ]
            )
        ],
        "stepTitles": ["洗切主料", "备葱姜", "打蛋", "炒蛋", "爆香翻炒", "调味出锅"],
        "pairings": {"side": "凉拌黄瓜", "soup": "紫菜蛋花汤", "staple": "米饭", "drink": "大麦茶"},
        "nutrition": {"caloriesKcal": 320, "proteinG": 18, "fatG": 20, "carbsG": 12},
        "imagePrompt": f"An overhead photo of {dish}, a home-style Chinese dish on a white plate, "
        "soft daylight, wooden table, steam rising, shallow depth of field.",
    }


def largest_recipe(dish: str) -> dict[str, Any]:
    """The largest recipe the recipe stage keeps: twelve steps, just under ``RECIPE_MAX_BYTES``."""
    from chuixiang.generation.recipe_format import RECIPE_MAX_BYTES

    recipe = recipe_for(dish)
    base = recipe["steps"]
    filler = "慢火收汁，随时尝味调整咸淡，注意火候，避免糊锅。"
    room = RECIPE_MAX_BYTES - len(json.dumps(recipe, ensure_ascii=False).encode()) - 12 * 40 - 1_024
    repeat = room // 12 // len(filler.encode())
    recipe["steps"] = [{"order": i + 1, "text": base[i % len(base)]["text"] + filler * repeat} for i in range(12)]
    return recipe


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


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))


def make_png(width: int = 64, height: int = 64, seed: int = 0, size_bytes: int | None = None) -> bytes:
    """A real, decodable RGB PNG (a colour gradient) built with zlib alone; with ``size_bytes``, a picture of
    random pixels (incompressible, as a large photo is) of exactly that size, every byte of it picture: the
    chunks a picture is kept with (:func:`noise_png`)."""
    if size_bytes is not None:
        return noise_png(size_bytes, seed)
    rows = []
    for y in range(height):
        row = bytearray([0])
        for x in range(width):
            row += bytes(((x * 4 + seed) % 256, (y * 4 + seed * 3) % 256, (seed * 7) % 256))
        rows.append(bytes(row))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = _png_chunk(b"IDAT", zlib.compress(b"".join(rows)))
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + idat + _png_chunk(b"IEND", b"")


def with_key_chunks(png: bytes, key: str) -> bytes:
    """``png`` with ``key`` in chunks a prober found stored byte for byte: an ICC profile's name, a suggested
    palette's name, a private chunk, a text chunk (hex in one of them), before its pixels."""
    chunks = (
        _png_chunk(b"iCCP", key.encode() + b"\x00\x00" + zlib.compress(b"profile")),
        _png_chunk(b"sPLT", key.encode() + b"\x00\x08"),
        _png_chunk(b"prVt", key.encode().hex().encode()),
        _png_chunk(b"tEXt", b"Comment\x00" + key.encode()),
    )
    at = png.index(b"IDAT") - 4
    return png[:at] + b"".join(chunks) + png[at:]


#: Bytes a PNG of one IDAT spends besides its pixel rows: signature, IHDR, the IDAT's and IEND's framing, the zlib
#: header and checksum, and the final (empty) stored block.
_PNG_FRAME = 8 + 25 + 12 + 12 + 2 + 4 + 5


def noise_png(size_bytes: int, seed: int = 0) -> bytes:
    """An RGB PNG of random pixels, exactly ``size_bytes`` long (at least 200): its rows as stored deflate blocks,
    the remainder made up with empty stored blocks (5 bytes) and empty IDAT chunks (12), both of which a decoder
    reads past."""
    width = 256
    row = 1 + 3 * width
    rng = random.Random(seed)  # nosec B311  # pixels, not a secret
    height = max(1, (size_bytes - _PNG_FRAME - 150) * 65535 // (65540 * row))
    raw = b"".join(b"\x00" + rng.randbytes(3 * width) for _ in range(height))
    blocks = [raw[i : i + 65535] for i in range(0, len(raw), 65535)]
    used = _PNG_FRAME + sum(5 + len(b) for b in blocks)
    gap = size_bytes - used
    empty_idats = next(b for b in range(5) if (gap - 12 * b) % 5 == 0 and gap >= 12 * b)
    empty_blocks = (gap - 12 * empty_idats) // 5
    stream = bytearray(b"\x78\x01")
    for block in [*blocks, *([b""] * empty_blocks)]:
        stream += b"\x00" + struct.pack("<HH", len(block), 0xFFFF ^ len(block)) + block
    stream += b"\x01" + struct.pack("<HH", 0, 0xFFFF) + struct.pack(">I", zlib.adler32(raw))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idats = _png_chunk(b"IDAT", bytes(stream)) + _png_chunk(b"IDAT", b"") * empty_idats
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + idats + _png_chunk(b"IEND", b"")
