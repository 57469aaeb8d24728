"""The prompts of the Gemma 3 270M fidelity goldens (tests/data/gemma3-270m-q4km-fidelity.json).

Shared by gen_gemma_goldens.py; 10-600 tokens each with BOS, covering few-shot,
code, chat (with and without a system prompt), CJK, numbers and a long English
text that crosses llama.cpp's 512-token micro-batch (and Gemma's 512-token
sliding window).
"""

GEMMA_TURN = "<start_of_turn>user\n{msg}<end_of_turn>\n<start_of_turn>model\n"

FEW_SHOT = ("Q: What is 17 * 23?\nA: 391\nQ: What is the capital of France?\nA: Paris\n"
            "Q: Translate 'thank you' into Japanese.\nA:")

CODE = '''import json


def load_config(path):
    """Read a JSON config file and fill in defaults."""
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    cfg.setdefault("threads", 4)
    cfg.setdefault("context", 2048)
    return cfg


def main():
    cfg = load_config("config.json")
    for key, value in sorted(cfg.items()):
'''

SYSTEM = ("You are a concise assistant for a hardware store. Answer in one or two sentences "
          "and suggest a product when it helps.")

LONG_EN = """The lighthouse on the northern cape had been automated for almost twenty years, but the village still \
spoke of it as if a keeper lived there. Children walking home from school would wave at the tower, and the old \
fishermen, mending nets on the quay, measured the weather by the way its beam cut through the evening haze. When \
the beam looked sharp and white, they said, the sea would be calm in the morning. When it looked soft and yellow, \
it was better to stay in port and repair the engines.

Mara had grown up with these sayings and had never believed them. She studied physics at the university in the \
city, four hours away by train, and she came back each summer to help her uncle with his small boat. This year, \
however, she arrived with a box of instruments: a thermometer that logged the air temperature every minute, a \
barometer, a humidity sensor, and a cheap camera that she fixed to the railing of her uncle's house so that it \
pointed at the lighthouse. Her plan was simple. She would record the colour and the sharpness of the beam every \
night, compare it with the measurements, and find out whether the fishermen's rule had any basis at all.

The first weeks were uneventful. The weather was stable, the beam was white, and the sea was flat. Her uncle \
laughed at the blinking lights on her laptop and asked whether the computer had learned to fish yet. Then, in the \
middle of July, a warm front moved in from the south-west. For three evenings the beam turned pale and diffuse, and \
on each of the following mornings the wind rose before sunrise and the harbour master kept the boats inside. Mara \
looked at her data and saw what the fishermen had seen for generations: when moist air arrived ahead of a change \
in the weather, the water droplets scattered the light and softened its edges. The yellow tint came from the way \
the haze removed the shorter, bluer wavelengths more strongly than the longer ones.

She wrote a short report and, a little nervously, presented it one evening in the back room of the harbour café. \
She had expected polite boredom. Instead, the fishermen asked questions for an hour. One of them wanted to know \
whether the rule would still work in winter, when the air was dry and cold. Another asked whether her camera could \
send a warning to their phones. The harbour master, who had said nothing all evening, finally stood up and asked \
whether she would come back next year to do the same with the fog horn. Mara promised that she would, and as she \
walked home along the quay she noticed that the beam of the lighthouse, sweeping over the dark water, looked sharp \
and white again. Tomorrow, she thought, the sea would be calm. In the morning"""

CJK = ("端侧推理系统由五个核心模块拼成：模型加载、分词器、计算内核、内存规划和服务接口。"
       "第一个模块负责")

NUMBERS = "2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47,"

TABLE = ("| year | revenue (M$) | growth |\n|---|---:|---:|\n| 2019 | 12.4 | 8% |\n| 2020 | 13.1 | 6% |\n"
         "| 2021 | 15.9 | 21% |\n| 2022 |")

PROMPTS = [
    # The first three are those of the bit-level goldens (gemma3-270m-q4km-goldens.json).
    {"name": "chat-en", "kind": "chat", "text": GEMMA_TURN.format(msg="Explain why the sky is blue.")},
    {"name": "chat-zh", "kind": "chat", "text": GEMMA_TURN.format(msg="你好，请介绍一下你自己。")},
    {"name": "plain", "kind": "completion", "text": "Once upon a time, there was a little girl named"},
    {"name": "few-shot", "kind": "completion", "text": FEW_SHOT},
    {"name": "code", "kind": "completion", "text": CODE},
    {"name": "chat-system", "kind": "chat",
     "text": GEMMA_TURN.format(msg=SYSTEM + "\n\nWhat do I need to hang a heavy mirror on a brick wall?")},
    {"name": "long-en", "kind": "completion", "text": LONG_EN},
    {"name": "cjk", "kind": "completion", "text": CJK},
    {"name": "numbers", "kind": "completion", "text": NUMBERS},
    {"name": "table", "kind": "completion", "text": TABLE},
]
