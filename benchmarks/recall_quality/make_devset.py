#!/usr/bin/env python3
"""Generate the labelled development set for the long-term-memory recall benchmark.

Writes (deterministically, stdlib only):
  data/session_log.jsonl   multi-session user/assistant conversations
  data/questions.jsonl     labelled recall questions with evidence message_ids
  data/README.md           description and counts

All conversations, names, companies and events are invented and hand-written
(template-assisted only for generic, on-topic distractor turns drawn from the
small pools below). After writing, the files are read back and validated.

Usage:  python make_devset.py
"""
from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
SESSION_LOG = DATA / "session_log.jsonl"
QUESTIONS = DATA / "questions.jsonl"
README = DATA / "README.md"

TS_FMT = "%Y-%m-%d %H:%M:%S"
TS_MIN = "2025-01-01 00:00:00"
TS_MAX = "2026-10-31 23:59:59"
CJK = re.compile(r"[\u4e00-\u9fff]")

# ---------------------------------------------------------------------------
# Generic, on-topic distractor turns (user text, assistant reply).  They carry
# no personal facts, so they never answer a question, but they share the
# vocabulary (dogs, cats, food, work, code, ...) of the evidence turns.
# ---------------------------------------------------------------------------
POOLS: dict[tuple[str, str], list[tuple[str, str]]] = {
    ("en", "dog"): [
        ("How many times a day should an adult dog be walked?",
         "Most adult dogs do well with two or three walks a day plus some play; high-energy breeds need more."),
        ("Is it okay to give dogs peanut butter as a treat?",
         "Yes, in small amounts. Just check the label for xylitol, which is toxic to dogs."),
        ("What's the best way to stop a dog pulling on the lead?",
         "Stop walking whenever the lead goes tight and reward them when it's loose. A front-clip harness helps too."),
        ("Any tips for keeping a dog calm during fireworks?",
         "Set up a quiet den, close the curtains, play background noise and stay calm yourself. A vet can advise on calming aids."),
        ("Do dogs actually enjoy being hugged?",
         "Many just tolerate it. Lip licking, yawning or turning the head away are signs they'd rather you didn't."),
        ("How can I tell if a dog food is decent quality?",
         "Look for a named meat as the first ingredient and a 'complete and balanced' statement for the right life stage."),
        ("Should a dog be crated when left home alone?",
         "It can help if the crate has been introduced as a safe space. Never use it as a punishment."),
        ("How often do dogs need their nails trimmed?",
         "Roughly every three to four weeks; if you hear clicking on the floor, they're too long."),
        ("Is it true that a tired dog is a good dog?",
         "Mostly, but mental work like sniffing games and puzzle feeders tires them out as much as running."),
    ],
    ("en", "cat"): [
        ("Why do cats knock things off tables?",
         "Mostly curiosity and play, and sometimes because it reliably gets your attention."),
        ("How often should a litter box be cleaned?",
         "Scoop daily and do a full change every one to two weeks, depending on the litter."),
        ("Is it true cats shouldn't drink milk?",
         "Most adult cats are lactose intolerant, so milk can upset their stomach. Water is best."),
        ("What's a good way to stop a cat scratching the sofa?",
         "Put a tall, sturdy scratching post right next to the sofa and reward using it. Double-sided tape on the sofa helps."),
        ("Do indoor cats still need vaccinations?",
         "Yes, the core vaccines are still recommended. Your vet can tailor the schedule."),
        ("How can I tell if a cat is bored?",
         "Overgrooming, night-time zoomies and constant attention-seeking can all be boredom. Short daily play sessions help."),
        ("Are automatic feeders a good idea for cats?",
         "They can be, especially for portion control. Just keep an eye on whether the cat is actually eating."),
    ],
    ("en", "food"): [
        ("What's a quick weeknight dinner that uses chickpeas?",
         "A chickpea and spinach curry: onion, garlic, curry paste, tinned tomatoes, chickpeas, spinach. About 25 minutes."),
        ("How long does cooked rice keep in the fridge?",
         "Ideally a day, up to three if it was cooled quickly and kept cold. Reheat until piping hot."),
        ("Can you freeze fresh herbs?",
         "Yes. Chop them and freeze in ice-cube trays with a little oil or water."),
        ("What's the difference between baking soda and baking powder?",
         "Baking soda needs an acid to activate; baking powder already contains one."),
        ("Any ideas for a packed lunch that isn't a sandwich?",
         "Grain bowls, pasta salad, leftover stir-fry, or a wrap with hummus and roasted veg all travel well."),
        ("How do I make scrambled eggs creamier?",
         "Low heat, stir constantly, and take them off just before they look done."),
        ("Is a cast iron pan worth it for a beginner?",
         "It's forgiving and lasts forever, but it's heavy and needs seasoning. A good stainless pan is an easy alternative."),
    ],
    ("en", "travel"): [
        ("What should I always pack in a carry-on?",
         "Medication, a change of clothes, chargers, documents and anything valuable."),
        ("Is it cheaper to book flights on a Tuesday?",
         "That's mostly a myth now. Booking a few weeks to a couple of months ahead matters more."),
        ("How do I deal with jet lag when flying east?",
         "Shift your sleep earlier a few days before, get morning light at your destination and avoid long naps."),
        ("Any tips for travelling with just a backpack?",
         "Pack versatile layers, roll your clothes and limit yourself to two pairs of shoes."),
        ("Do I really need travel insurance for a short trip?",
         "It's worth it if you couldn't easily absorb medical or cancellation costs. Check what your bank card already covers."),
        ("What's an easy way to keep track of travel expenses?",
         "A shared spreadsheet or an expense app where you log each purchase the same day."),
    ],
    ("en", "work"): [
        ("How do I politely decline a meeting?",
         "Thank them, say you can't make it, and offer an alternative such as async notes or a later slot."),
        ("What's a good structure for a weekly status update?",
         "Done, in progress, blocked, and next, with a line or two each."),
        ("How do I ask for feedback without it being awkward?",
         "Ask something specific, like 'What's one thing I could do differently in planning meetings?'"),
        ("Any tips for staying focused when working from home?",
         "Fixed start and end times, a dedicated spot, and batching messages into a few check-ins."),
        ("How long should a cover letter be?",
         "Under one page, usually three or four short paragraphs."),
        ("What's the best way to prepare for a performance review?",
         "List your wins with evidence, note what you learned, and bring a question about growth."),
        ("How do I handle a coworker who keeps interrupting?",
         "Try a calm 'Let me just finish this thought' in the moment, and talk privately if it keeps happening."),
    ],
    ("en", "code"): [
        ("What's the difference between a process and a thread?",
         "Processes have separate memory; threads share memory inside one process, so they're lighter but need synchronisation."),
        ("How do I undo the last git commit but keep the changes?",
         "git reset --soft HEAD~1"),
        ("Is it worth learning regex properly?",
         "Yes. Character classes, quantifiers, groups and anchors cover most real cases and pay off quickly."),
        ("Why is my Python script so slow with big lists?",
         "Look for repeated 'in' checks on lists (use a set or dict instead) and string concatenation inside loops."),
        ("What does idempotent mean for an API?",
         "Sending the same request several times has the same effect as sending it once."),
        ("How should I name git branches?",
         "Something like feature/short-description or fix/issue-123 keeps things readable."),
        ("What belongs in a README for a small project?",
         "What it does, how to install and run it, and one example. Keep it short."),
    ],
    ("en", "fitness"): [
        ("How many rest days should I take per week?",
         "One or two is typical, more if you're sore or sleeping badly."),
        ("Is stretching before a run necessary?",
         "Dynamic warm-ups like leg swings help more than static stretching beforehand."),
        ("What's a simple core workout I can do at home?",
         "Planks, dead bugs, glute bridges and side planks: three rounds of 30 to 45 seconds each."),
        ("How do I avoid getting injured when I train more?",
         "Build up gradually and increase weekly volume by about 10% at most."),
        ("Does it matter what time of day I exercise?",
         "Not much. Consistency matters far more than timing."),
        ("How much water should I drink during a workout?",
         "Sip regularly. For sessions under an hour, plain water is usually enough."),
    ],
    ("en", "home"): [
        ("How do I get rid of condensation on the windows?",
         "Ventilate daily, use extractor fans, dry laundry outside if you can, and consider a dehumidifier."),
        ("What's the easiest way to clean an oven?",
         "A baking soda paste left overnight, then wipe it off and spray with vinegar."),
        ("Are smart plugs worth buying?",
         "They're handy for lamps and schedules, less useful for devices with their own standby logic."),
        ("How do I keep houseplants alive while I'm away?",
         "Water well before you leave, group them together out of direct sun, and use wicking or self-watering pots."),
        ("What's a good way to organise a small kitchen?",
         "Use vertical space, keep daily items within reach and store rarely used gadgets elsewhere."),
        ("Any tips for packing boxes?",
         "Heavy things in small boxes, label by room, and keep an 'open first' box of essentials."),
    ],
    ("en", "family"): [
        ("What's a good gift for a one-year-old?",
         "Stacking cups, board books or a push-along toy. Simple things get the most use."),
        ("How do I plan a birthday party on a small budget?",
         "Host at home or in a park, keep it short, pick one activity and make simple food."),
        ("How do you stay close to family who live far away?",
         "Short regular video calls, a shared photo album and the occasional posted letter go a long way."),
        ("Any ideas for a family board game night?",
         "Ticket to Ride, Dixit and Sushi Go! are easy to learn and work across ages."),
        ("How can I help a kid with homework without doing it for them?",
         "Ask guiding questions, let them explain their thinking, and praise effort over answers."),
    ],
    ("en", "study"): [
        ("What's the best way to memorise vocabulary?",
         "Spaced repetition: short daily flashcard reviews beat long cramming sessions."),
        ("How do I take better notes in lectures?",
         "Write questions and key ideas rather than transcripts, then summarise within a day."),
        ("Is the Pomodoro technique actually useful?",
         "For many people, yes. 25 focused minutes and a short break makes it easier to start and keep going."),
        ("How do I stop procrastinating on big assignments?",
         "Break it into tiny first steps and schedule the very first one for today."),
        ("How can I practise speaking a language on my own?",
         "Shadow audio, describe your day out loud, and record yourself to compare."),
    ],
    ("en", "misc"): [
        ("What's a good podcast length for a commute?",
         "20 to 40 minutes suits most commutes, and many shows have shorter episodes too."),
        ("Any book recommendations for a long flight?",
         "Something absorbing and plot-driven, like a thriller or a big fantasy novel."),
        ("How should I back up the photos on my phone?",
         "Turn on automatic cloud backup and keep a second copy on a computer or external drive."),
        ("What's a nice way to spend a rainy Sunday?",
         "Cook something slow, start a new book, or catch a cinema matinee."),
        ("How do I make my phone battery last longer?",
         "Lower the brightness, turn off background refresh for apps you rarely use and avoid extreme heat."),
        ("Is it worth learning to touch type?",
         "Yes. A few weeks of practice makes all writing noticeably faster."),
    ],
    ("zh", "dog"): [
        ("狗狗一天遛几次比较合适？", "一般成年犬每天两到三次，每次二三十分钟，活泼的品种需要更多运动。"),
        ("夏天遛狗要注意什么？", "避开中午高温，地面太烫会伤脚垫，记得带水。"),
        ("狗狗可以吃水果吗？", "苹果、香蕉、蓝莓少量可以，葡萄和提子绝对不行。"),
        ("怎么训练狗狗不乱叫？", "先找到叫的原因，安静的时候及时奖励，别在它叫的时候给关注。"),
        ("狗粮怎么挑比较好？", "看配料表第一位是不是明确的肉类，选适合年龄段的配方。"),
        ("给狗洗澡多久一次合适？", "一般两三周一次，太频繁会破坏皮肤油脂。"),
        ("狗狗掉毛严重怎么办？", "换毛季多梳毛，饮食里补充优质脂肪，必要时看兽医。"),
    ],
    ("zh", "cat"): [
        ("猫砂多久要全部换一次？", "每天铲屎，一到两周全换一次，具体看猫砂类型。"),
        ("猫为什么总喜欢踩奶？", "这是小时候吃奶留下的习惯，说明它觉得放松和安全。"),
        ("猫咪不爱喝水怎么办？", "可以试试流动饮水机，多放几个水碗，或者喂点湿粮。"),
        ("室内猫也需要打疫苗吗？", "需要，核心疫苗按兽医建议定期加强。"),
        ("猫抓沙发怎么办？", "在沙发旁放一个稳固的猫抓板，用猫薄荷吸引它，在抓板上抓就奖励。"),
        ("猫咪吐毛球正常吗？", "偶尔吐毛球正常，太频繁就要多梳毛或者喂化毛膏。"),
        ("养猫有必要买猫爬架吗？", "推荐买一个，猫喜欢待在高处，能消耗精力也有安全感。"),
    ],
    ("zh", "food"): [
        ("有什么十分钟能做好的晚饭？", "番茄炒蛋配米饭、葱油拌面、青菜鸡蛋面都很快。"),
        ("剩米饭怎么保存比较安全？", "尽快放凉后冷藏，一两天内吃完，加热要热透。"),
        ("电饭煲能做蛋糕吗？", "可以，用蛋糕模式或者煮饭模式，中途别开盖。"),
        ("炒青菜怎么保持翠绿？", "大火快炒，出锅前再放盐，也可以先焯水过凉。"),
        ("自己做饭怎么控制油盐？", "用带刻度的油壶，出锅前再放盐，多用葱姜蒜和醋提味。"),
        ("冬天适合煲什么汤？", "萝卜排骨汤、玉米胡萝卜汤、菌菇汤都不错。"),
        ("外卖吃多了怎么调整饮食？", "每餐保证一份蔬菜，少点油炸和重口味，晚上尽量清淡。"),
    ],
    ("zh", "travel"): [
        ("坐高铁带什么比较方便？", "身份证、充电宝、水杯和一件薄外套，车厢里空调有时候偏冷。"),
        ("节假日出游怎么避开人流？", "错峰出行，选小众目的地，热门景点一开门就去。"),
        ("出国旅行要换多少现金？", "现在很多地方能刷卡，带少量当地现金应急就够了。"),
        ("怎么订到便宜的机票？", "提前一两个月关注，开启价格提醒，周中出发通常更便宜。"),
        ("行李箱怎么收拾更省空间？", "衣服卷起来放，用收纳袋分类，鞋子里塞袜子。"),
        ("旅行时怎么倒时差？", "提前几天调整作息，到了以后多晒太阳，白天别睡太久。"),
    ],
    ("zh", "work"): [
        ("周报怎么写才不像流水账？", "按成果、进展、风险、下周计划来写，每条一两句，突出结果。"),
        ("开会总是跑题怎么办？", "会前发议程，指定主持人控制时间，跑题的话题记下来会后再说。"),
        ("怎么跟领导提加薪？", "准备好具体成果和市场数据，选个合适的时机，语气平和地提出来。"),
        ("同事总把活推给我怎么办？", "先明确自己的优先级，礼貌说明手头的任务，必要时请上级协调。"),
        ("远程办公怎么保持效率？", "固定作息和工作区，用待办清单，定时起来活动。"),
        ("面试被问到缺点怎么回答？", "说一个真实但不致命的缺点，再讲清楚你是怎么改进的。"),
        ("怎么做一份清楚的汇报材料？", "一页一个观点，标题直接写结论，能用图表就别用大段文字。"),
    ],
    ("zh", "code"): [
        ("git 合并冲突怎么解决？", "打开冲突文件，保留需要的代码，删掉冲突标记，再 add 和 commit。"),
        ("正则表达式怎么匹配手机号？", "简单版可以用 ^1[3-9]\\d{9}$。"),
        ("Python 里列表和元组有什么区别？", "列表可变，元组不可变；元组可以当字典的键。"),
        ("SQL 里 WHERE 和 HAVING 有什么区别？", "WHERE 在分组前过滤行，HAVING 在分组后过滤聚合结果。"),
        ("代码注释写多少合适？", "重点解释为什么这样做，而不是重复代码在做什么。"),
        ("单元测试怎么写比较好？", "每个测试只验证一件事，命名清楚，覆盖正常情况和边界情况。"),
    ],
    ("zh", "fitness"): [
        ("跑步膝盖疼是怎么回事？", "可能是跑量加得太快或者跑姿有问题，先休息，再加强臀腿力量。"),
        ("每周运动几次比较合适？", "一般三到五次，每次三十分钟以上，中间留出恢复时间。"),
        ("运动前一定要拉伸吗？", "运动前做动态热身，静态拉伸放在运动后效果更好。"),
        ("晚上运动会影响睡眠吗？", "睡前一两个小时内剧烈运动可能影响入睡，早一点练更好。"),
        ("平板支撑每次做多久合适？", "从三十秒开始，动作标准比时间长更重要。"),
        ("减脂期间应该怎么吃？", "保证蛋白质，控制总热量，少喝含糖饮料。"),
    ],
    ("zh", "home"): [
        ("回南天怎么防潮？", "关好门窗，开除湿机或者空调除湿模式，地面及时擦干。"),
        ("租房签合同要注意什么？", "看清押金退还条件、维修责任和提前退租的规定，入住时拍好照片。"),
        ("小户型怎么收纳？", "多利用墙面和床底空间，选带储物功能的家具，定期断舍离。"),
        ("搬家怎么打包不容易丢东西？", "按房间装箱并贴标签，贵重物品随身带，准备一个常用品箱。"),
        ("新装修的房子怎么去甲醛？", "多通风是最有效的办法，入住前尽量通风几个月。"),
        ("家里绿植总养不活怎么办？", "先选绿萝、虎皮兰这类好养的，别浇水太勤。"),
    ],
    ("zh", "family"): [
        ("孩子不爱吃蔬菜怎么办？", "让孩子参与做饭，把蔬菜切成有趣的形状，大人以身作则。"),
        ("给长辈买什么礼物比较实用？", "按摩仪、保暖衣物、体检套餐都很实用。"),
        ("怎么跟爸妈视频他们才不嫌麻烦？", "固定时间打，帮他们设好快捷方式，一点就能接通。"),
        ("孩子写作业拖拉怎么办？", "把任务拆小，规定时间，完成后给一点自由时间当奖励。"),
        ("过年回家怎么应对亲戚追问？", "提前想好简短的回答，再把话题引到对方感兴趣的事情上。"),
        ("家庭聚餐点什么菜比较稳妥？", "荤素搭配，照顾老人和孩子的口味，再加一道汤。"),
    ],
    ("zh", "study"): [
        ("背单词有什么好方法？", "用间隔重复，每天少量多次复习，比一次背很多有效。"),
        ("怎么提高阅读速度？", "先看标题和段首句抓框架，减少回读，多练习。"),
        ("学习的时候总想玩手机怎么办？", "把手机放到另一个房间，用番茄钟，每次专注二十五分钟。"),
        ("论文写不下去怎么办？", "先写最有把握的部分，别追求一遍写好，先完成再完善。"),
        ("读书笔记怎么做比较有用？", "用自己的话总结要点，记下疑问和联想，而不是抄原文。"),
        ("考试前一晚要不要熬夜复习？", "不建议，睡眠对巩固记忆很重要，早点睡效果更好。"),
    ],
    ("zh", "misc"): [
        ("手机内存总是不够怎么办？", "清理聊天软件的缓存，照片备份到云端后删掉本地的。"),
        ("周末下雨在家干点什么好？", "看部电影、做顿饭、整理房间，或者读一本一直想读的书。"),
        ("怎么养成早起的习惯？", "固定起床时间，晚上少看手机，早上给自己安排一件期待的小事。"),
        ("通勤的时候适合听什么播客？", "单集二三十分钟的访谈类或者故事类播客最合适。"),
        ("电脑越来越慢怎么办？", "关掉开机自启的软件，清理磁盘，必要时加内存或换固态硬盘。"),
    ],
}

ACKS = {
    "en": ["Got it, thanks for telling me.", "Noted.", "Makes sense, I'll keep that in mind.",
           "Thanks for the update!", "Understood."],
    "zh": ["好的，记下了。", "明白了。", "收到，谢谢告诉我。", "了解。"],
}

# ---------------------------------------------------------------------------
# Small DSL for writing users
# ---------------------------------------------------------------------------
USERS: list[dict] = []


def T(text: str, reply: str | None = None):
    """Unlabelled user turn (chatty distractor or context)."""
    return (None, text, reply)


def K(key: str, text: str, reply: str | None = None):
    """Keyed user turn that questions can cite as evidence."""
    return (key, text, reply)


def P(topic: str):
    """Generic distractor drawn from POOLS; topic 'dog' or 'zh:dog'."""
    return ("@pool", topic, None)


def S(start: str, *turns):
    return (start, list(turns))


def Q(category: str, query: str, *keys: str):
    return {"category": category, "query": query, "keys": list(keys), "restated": False}


def QR(query: str, *keys: str):
    """Single-fact question about a preference the user restated in several
    sessions: every restatement is listed as evidence (any one suffices)."""
    return {"category": "single", "query": query, "keys": list(keys), "restated": True}


def add_user(uid: str, group: str, pool_lang: str, sessions, questions):
    USERS.append({"uid": uid, "group": group, "pool_lang": pool_lang,
                  "sessions": sessions, "questions": questions})


# ===========================================================================
# English users
# ===========================================================================

# u01 - UX designer, Lyon -> Paris, beagle Biscuit, prefers tables
add_user("u01", "en", "en", [
    S("2025-01-14 19:05",
      T("Hi! I'm trying to get more organised this year, so I thought I'd start using you for planning.",
        "Happy to help. What would you like to start with?"),
      K("job", "Mostly work stuff. I'm a UX designer at a small agency called Fernwood Studio and we're juggling three clients at once.",
        "That's a lot to juggle. Want a simple weekly planning template?"),
      K("pref_t1", "Yes please. One thing: whenever you compare options, put them in a table. Bullet lists are really hard for me to scan.",
        "Understood. Comparisons will come as tables from now on."),
      K("city_old", "Also, I'm based in Lyon, so anything time-related should be in Central European time.",
        "Got it, I'll use CET/CEST for times."),
      T("We're thinking about getting a dog at some point. Are beagles very loud?",
        "They can be vocal. Beagles bay when bored or on a scent, so plenty of exercise and sniffing games help."),
      K("figma", "Last thing: I basically live in Figma all day, so if you suggest tools, make sure they play nicely with it.",
        "Noted. I'll favour tools with good Figma integrations."),
      ),
    S("2025-03-02 10:40",
      K("dog", "Big news: we adopted a beagle puppy yesterday! We named him Biscuit.",
        "Congratulations! Biscuit is a perfect name for a beagle."),
      P("dog"),
      T("Is it normal for a puppy to sleep most of the day?",
        "Yes, puppies often sleep 18 to 20 hours a day. It's how they grow."),
      K("sister", "My sister Lena is driving down from Grenoble next weekend just to meet him. She's obsessed already.",
        "That's sweet, and an early visitor is good for socialisation too."),
      P("dog"),
      ),
    S("2025-06-20 18:15",
      K("diet", "Can you suggest a few dinners for a busy week? Keep in mind I haven't eaten meat in about five years.",
        "Sure: a lentil ragu, a halloumi traybake and a black bean chilli would cover three nights."),
      K("pref_t2", "Could you lay those out side by side with prep time and cost? Grid format, not a list, like I said before.",
        "Of course. Here's a table with prep time and rough cost per dish."),
      T("Unrelated, but our neighbour's dog Pepper barks every time we walk past their gate and it winds up the little one.",
        "Frustrating! Crossing the street or rewarding calm behaviour as you pass can help."),
      P("food"),
      P("dog"),
      ),
    S("2025-10-08 21:02",
      K("city_new", "We finally did it: moved to Paris last week! We're in the 11th arrondissement now.",
        "Congratulations on the move! The 11th is lively, lots of cafes and little parks."),
      T("The flat is tiny compared to our old place. Any tips for making a small living room feel bigger?",
        "Mirrors, light curtains, furniture on legs, and one larger rug instead of several small ones."),
      K("nephew", "Oh, and Lena had her baby on Sunday, a little boy called Otto. I'm an aunt!",
        "Congratulations, auntie! Otto is a lovely name."),
      P("home"),
      T("The dog is coping with the move better than we are, honestly.",
        "Dogs adapt quickly when their routine stays the same. Sounds like he's doing great."),
      ),
    S("2026-02-17 08:30",
      K("italian", "New year, new hobby: I started Italian lessons this month, every Tuesday evening.",
        "Che bello! Want some vocabulary drills to go with the classes?"),
      P("study"),
      K("pref_t3", "Could you give me the present-tense endings for -are, -ere and -ire verbs? Rows and columns, as always, that's what works for me.",
        "Here's a table with the endings for all three verb groups."),
      T("Work is getting busier too, we just picked up a fourth client.",
        "Congrats! Shall we revisit the weekly planning template for four clients?"),
      P("work"),
      ),
], [
    Q("single", "What is the name of the user's dog?", "dog"),
    Q("single", "Where does the user live at the moment?", "city_new"),
    Q("single", "What does the user do for a living?", "job"),
    Q("single", "Any dietary restrictions to consider when suggesting recipes?", "diet"),
    QR("How does the user want side-by-side comparisons formatted?", "pref_t1", "pref_t2", "pref_t3"),
    Q("single", "What's the name of the user's sibling?", "sister"),
    Q("single", "Which design software does the user work in most of the time?", "figma"),
    Q("single", "Which foreign language is the user studying?", "italian"),
    Q("multi_hop", "Where did the user live before moving to Paris?", "city_old", "city_new"),
    Q("multi_hop", "What is the name of the user's nephew?", "sister", "nephew"),
    Q("multi_hop", "Which city was the user living in when they got their dog?", "city_old", "dog", "city_new"),
    Q("multi_hop", "In which Paris arrondissement does Biscuit live now?", "dog", "city_new"),
    Q("temporal", "When did the user adopt Biscuit?", "dog"),
    Q("temporal", "How long ago did the user relocate to Paris?", "city_new"),
    Q("temporal", "When did the user begin language classes?", "italian"),
])

# u02 - backend engineer, Quarry Bank -> Tidewell Health, tabs -> spaces, cat Pixel
add_user("u02", "en", "en", [
    S("2025-01-22 07:48",
      K("job_old", "Morning. I'm a backend dev at Quarry Bank, mostly Java services for payments, and I want to brush up on system design.",
        "Good goal. Want to start with a classic problem like a rate limiter or a payments ledger?"),
      K("pref_short1", "Rate limiter. And keep it short please, skip the intro paragraphs, I just want the core idea.",
        "Token bucket: tokens refill at a fixed rate, each request takes one, reject when the bucket is empty."),
      K("tabs", "Perfect. Side question: our codebase indents with tabs and I'm fine with that, but the new linter complains. How do I configure it?",
        "Set the indent rule to tabs in the linter config, for example indent: ['error', 'tab'] in ESLint-style tools."),
      P("code"),
      K("cat", "My cat Pixel just walked across the keyboard and pushed a commit, so if you see gibberish, that's why.",
        "Ha, Pixel's first contribution! Maybe protect the main branch."),
      ),
    S("2025-04-09 22:10",
      K("k8s", "I've deployed a couple of Kubernetes clusters for side projects on bare VMs with kubeadm, but never used a managed service. Is EKS worth it?",
        "For most teams, yes: the control plane is managed and upgrades are easier, at extra cost."),
      P("code"),
      K("allergy", "Different topic. I'm allergic to peanuts and I'm putting together the snack list for our team offsite. Can you double-check it?",
        "Of course. Paste the list and I'll flag anything with peanuts or likely cross-contamination."),
      T("Trail mix, granola bars, dark chocolate, pretzels, satay skewers.",
        "Flags: satay sauce is usually peanut-based, and trail mix and granola bars often contain peanuts, so check the labels."),
      P("work"),
      K("city", "The offsite is here in Denver, so it's a short drive for most of us.",
        "Nice, that keeps logistics easy. Need help with an agenda?"),
      ),
    S("2025-08-15 19:30",
      K("job_new", "Update: I left Quarry Bank. Starting Monday I'm a senior engineer at Tidewell Health, working on their appointment-scheduling API.",
        "Congratulations on the new role! Healthcare scheduling is an interesting domain."),
      K("spaces", "They use spaces, four per level, enforced in CI, so I've switched my editor over. Goodbye tabs.",
        "Makes sense to match the team. Set insertSpaces to true and tabSize to 4 in your editor."),
      K("pref_short2", "Can you explain HIPAA basics for an API developer? Again, brief, just the essentials, no warm-up.",
        "Encrypt PHI in transit and at rest, log access, use the minimum necessary data, and sign BAAs with vendors."),
      P("fitness"),
      K("partner", "My partner Sam says I've talked about nothing but the new job all week.",
        "Understandable excitement. Maybe plan something non-work with Sam this weekend."),
      ),
    S("2026-01-11 16:05",
      K("halfmara", "I ran my first half marathon this morning! 1:52, way better than I expected.",
        "Fantastic time for a first half. Congratulations!"),
      P("fitness"),
      T("How long should I rest before running again?",
        "An easy jog after three to five days is usually fine, or a full week if you're sore."),
      K("pref_short3", "You know me: give me the shortest possible version of a recovery plan.",
        "Days 1-3 walk, days 4-7 easy runs, week 2 back to normal."),
      K("sam_job", "Sam is a physiotherapist, so at least I got an expert leg massage afterwards.",
        "Lucky you, that's the best kind of recovery support."),
      ),
], [
    Q("single", "Which company does the user work for now?", "job_new"),
    QR("Does the user want long, detailed explanations or concise ones?", "pref_short1", "pref_short2", "pref_short3"),
    Q("single", "What's the user's pet called?", "cat"),
    Q("single", "Does the user have any food allergies?", "allergy"),
    Q("single", "Has the user ever set up a Kubernetes cluster himself?", "k8s"),
    Q("single", "Which city is the user based in?", "city"),
    Q("single", "Who is the user's significant other?", "partner"),
    Q("single", "Which indentation style does the user follow nowadays?", "spaces"),
    Q("multi_hop", "Where did the user work before joining Tidewell Health, and on what kind of systems?", "job_old", "job_new"),
    Q("multi_hop", "What indentation style did the user use before the switch to spaces?", "tabs", "spaces"),
    Q("multi_hop", "Which company was the team offsite with the peanut-free snack list for?", "allergy", "job_old", "job_new"),
    Q("multi_hop", "What does the user's significant other do professionally?", "partner", "sam_job"),
    Q("temporal", "When did the user start at Tidewell Health?", "job_new"),
    Q("temporal", "On what date did the user run his first half marathon?", "halfmara"),
    Q("temporal", "How many months after changing jobs did the user complete a half marathon?", "job_new", "halfmara"),
])

# u03 - nurse in Leeds -> data analyst in Manchester, cats Mango & Kiwi, prefers SQL
add_user("u03", "en", "en", [
    S("2025-02-03 23:40",
      K("nurse", "Just finished a night shift. I'm a nurse on the cardiac ward at St. Aldric Hospital and I'm honestly exhausted.",
        "That sounds draining. Would some tips for winding down after nights help?"),
      T("Yes please, I can never sleep straight after.",
        "Dim the lights, use blackout curtains, have a light snack and keep the same wind-down routine every time."),
      K("cats", "The cats don't help. Mango and Kiwi think 8am is breakfast time no matter what shift I've done.",
        "Ha. An automatic feeder might buy you a couple of extra hours."),
      K("leeds", "Our flat in Leeds is right next to a bus depot as well, so it's never quiet.",
        "Earplugs or a white-noise machine could help block that out."),
      P("cat"),
      ),
    S("2025-05-18 14:20",
      K("quit", "I've handed in my notice at the hospital. I'm doing a full-time data analytics bootcamp from June.",
        "Big step, congratulations! What does the bootcamp cover?"),
      T("SQL, Python, Tableau and some statistics.",
        "Solid mix. Want a SQL refresher before it starts?"),
      K("pref_sql1", "Yes. Please use plain SQL for examples rather than pandas. SQL just clicks for me.",
        "Noted, SQL examples by default."),
      K("lactose", "Random one, but can you suggest study snacks? I'm lactose intolerant, so nothing cheese-heavy.",
        "Hummus with veg sticks, nuts, oat yoghurt, dark chocolate and fruit."),
      P("study"),
      ),
    S("2025-09-27 12:05",
      K("mcr_job", "Guess what: I got a job as a junior data analyst at Brightline Energy, and we've moved to Manchester for it.",
        "Congratulations on both! How are you finding Manchester?"),
      K("isla", "Good so far. Isla starts primary school here on Monday and she's very nervous.",
        "First days are big. A walk past the school beforehand and a predictable morning routine help."),
      K("duckdb", "At work I've been using DuckDB on parquet files to analyse smart-meter readings. It's so fast.",
        "DuckDB is great for that. Querying parquet directly saves a whole load step."),
      P("work"),
      ),
    S("2026-03-09 20:45",
      K("churn", "I built a customer churn analysis in DuckDB and my manager presented it to the leadership team!",
        "That's a great milestone for your first year as an analyst."),
      K("pref_sql2", "Can you show me how to compute a 7-day rolling average? SQL again, not pandas.",
        "Use a window function: AVG(x) OVER (ORDER BY day ROWS BETWEEN 6 PRECEDING AND CURRENT ROW)."),
      P("cat"),
      T("Kiwi has started sleeping on my laptop whenever I work from home.",
        "Laptops are warm. A heated pad next to the desk might lure her away."),
      P("code"),
      ),
], [
    Q("single", "用户的两只猫叫什么名字？", "cats"),
    Q("single", "What does the user do for a living now?", "mcr_job"),
    QR("Which language should data examples for this user be written in?", "pref_sql1", "pref_sql2"),
    Q("single", "Can the user eat dairy?", "lactose"),
    Q("single", "What's the user's daughter called?", "isla"),
    Q("single", "What engine does the user query parquet files with?", "duckdb"),
    Q("single", "What piece of work did the user do that senior management saw?", "churn"),
    Q("single", "Which hospital ward did the user work on?", "nurse"),
    Q("multi_hop", "Which city did the user move to after leaving the hospital where she worked as a nurse?", "nurse", "mcr_job"),
    Q("multi_hop", "Where did the user live before Manchester?", "leeds", "mcr_job"),
    Q("multi_hop", "What training bridged the user's move from nursing into her analyst role?", "quit", "mcr_job"),
    Q("multi_hop", "Besides the churn project, what data has the user analysed with the same engine?", "churn", "duckdb"),
    Q("temporal", "When did the user's data bootcamp start?", "quit"),
    Q("temporal", "On which day did Isla start primary school?", "isla"),
    Q("temporal", "How long has the user been working at Brightline Energy?", "mcr_job"),
])

# u04 - chemistry teacher in Glasgow, border collie Rollo, metric units
add_user("u04", "en", "en", [
    S("2025-01-09 17:30",
      K("job", "Evening! I teach chemistry at Braeburn High in Glasgow and I'm planning a unit on reaction rates.",
        "Nice topic. Want a practical with sodium thiosulfate and the disappearing cross?"),
      T("Yes, that's the classic. Can you draft a risk assessment outline?",
        "Sure: hazards, who's at risk, control measures, emergency actions and disposal."),
      K("metric1", "Use metric for everything please: grams, millilitres, degrees Celsius. I can't stand converting.",
        "Metric only, noted."),
      K("rollo", "Our border collie Rollo just stole a whole sandwich off the counter.",
        "Collies are clever thieves! Maybe a 'leave it' training session is due."),
      K("fiona", "My partner Fiona is a land surveyor, so she's out in the field all week and I'm on dog duty.",
        "Sounds like Rollo gets plenty of attention from you then."),
      P("dog"),
      ),
    S("2025-04-26 09:15",
      K("munro", "Fiona and I are doing our 40th Munro today, Ben Lui. Any tips for the snowfield near the top?",
        "Carry an ice axe and crampons if there's old snow, and check the mountain forecast before setting off."),
      T("We'll be careful. She does all the navigating anyway.",
        "Good to have a reliable navigator on the hill."),
      T("We used to take our old dog Juniper on the hills, before she passed away two years ago.",
        "I'm sorry. It sounds like she had some great adventures."),
      P("fitness"),
      P("dog"),
      ),
    S("2025-08-30 20:00",
      K("pi", "I'm setting up Raspberry Pis with temperature sensors so pupils can log data during experiments.",
        "Great idea. A DS18B20 sensor and a short Python script will get you started."),
      K("metric2", "Can you give me the sensor specs? Celsius and millimetres, you know the drill, no imperial.",
        "DS18B20: -55 to 125 degrees C, about 0.5 degrees C accuracy, TO-92 package roughly 5 mm wide."),
      P("code"),
      T("The kids named one of the Pis 'Beaker', which I love.",
        "Perfect lab name."),
      ),
    S("2026-02-05 18:45",
      K("hod", "Big change at work: I've been promoted to head of science at Braeburn, starting after the February break.",
        "Congratulations! That's a big step up."),
      P("work"),
      K("cello", "I've also started cello lessons, which Fiona says is my midlife crisis.",
        "Ha! The cello is a lovely instrument to learn."),
      T("How often should an adult beginner practise?",
        "Twenty to thirty minutes most days beats one long weekly session."),
      P("dog"),
      ),
    S("2026-06-14 11:20",
      K("rollo_age", "Rollo turned five today, so we took him up Conic Hill for a birthday walk.",
        "Happy birthday, Rollo! Great views from up there."),
      P("travel"),
      T("We're planning a summer trip to Skye. What should I book early?",
        "Accommodation and the ferry if you're taking the car. Both sell out in summer."),
      ),
], [
    Q("single", "Which school subject is the user responsible for?", "job"),
    QR("Which measurement units does the user want in answers?", "metric1", "metric2"),
    Q("single", "What is the name of the user's current dog?", "rollo"),
    Q("single", "What is Fiona's profession?", "fiona"),
    Q("single", "Which instrument has the user taken up?", "cello"),
    Q("single", "What is the user's role at school now?", "hod"),
    Q("single", "What hardware is the user using for pupils' experiment data logging?", "pi"),
    Q("single", "How many Munros had the user and Fiona climbed by the Ben Lui trip?", "munro"),
    Q("multi_hop", "What breed is the dog that got a birthday walk up Conic Hill?", "rollo", "rollo_age"),
    Q("multi_hop", "In which city is the school where the user got a promotion?", "job", "hod"),
    Q("multi_hop", "What does the person who climbed Ben Lui with the user do for a living?", "munro", "fiona"),
    Q("multi_hop", "How old was Rollo when the user took over as head of science?", "hod", "rollo_age"),
    Q("temporal", "When did the user climb Ben Lui?", "munro"),
    Q("temporal", "When does the user's new leadership role at school begin?", "hod"),
    Q("temporal", "When is Rollo's birthday?", "rollo_age"),
])

# u05 - freelance illustrator, Austin -> Portland, rabbit Biscuit, prefers bullet lists
add_user("u05", "en", "en", [
    S("2025-02-14 13:00",
      K("job", "Hey, I'm a freelance illustrator and I need help writing a polite invoice reminder.",
        "Sure. Something like 'Just a friendly reminder that invoice #... is now overdue'. Want a full draft?"),
      K("pref_bul1", "Yes, and when you give me options, bullet points please. Big paragraphs make my eyes glaze over.",
        "Got it, bulleted options from here on."),
      K("procreate", "I do everything in Procreate on my iPad, so brush tips are always welcome.",
        "Try the stock pencil with streamline turned up for clean inking."),
      K("austin", "It's already warm here in Austin, so I'm working out on the porch today.",
        "Lovely. Just watch out for glare on the screen."),
      P("misc"),
      ),
    S("2025-05-05 10:10",
      K("bunny", "My rabbit Biscuit chewed through my Apple Pencil charging cable. Are rabbits always this destructive?",
        "Chewing is instinctive for rabbits. Covering cables with split tubing helps a lot."),
      T("What should a rabbit's diet mostly be?",
        "About 80% hay, plus leafy greens and a small portion of pellets."),
      K("book", "I just signed a contract to illustrate a children's picture book called 'The Lantern Fox'! Final art is due in November.",
        "Congratulations! That's a wonderful project."),
      K("pref_bul2", "Can you help me break that into milestones? Bulleted, please, same as always.",
        "- Thumbnails by June\n- Sketches by August\n- Colour roughs by September\n- Final art by November"),
      P("work"),
      ),
    S("2025-09-12 08:05",
      K("portland", "We moved to Portland at the end of August! Cooler weather, finally.",
        "Welcome to the Pacific Northwest! How's the new place?"),
      K("coffee", "Still unpacking, but I found a cafe that does a proper oat-milk flat white, which is all I need in life.",
        "Priorities sorted!"),
      P("home"),
      K("marco", "My brother Marco flew up from Texas to help carry boxes.",
        "That's kind of him. Moving is so much easier with help."),
      P("travel"),
      ),
    S("2026-01-20 15:30",
      K("csp", "I've switched from Procreate to Clip Studio Paint on a Wacom tablet. The book needed proper CMYK export.",
        "Makes sense for print work. Clip Studio handles CMYK and bleed settings well."),
      T("Any shortcuts you'd recommend learning first?",
        "Brush size, undo, the eyedropper and the transform tool."),
      K("pref_bul3", "List them as bullets again, it's easier for me to tape next to my desk.",
        "- [ and ] brush size\n- Ctrl+Z undo\n- Alt eyedropper\n- Ctrl+T transform"),
      K("bookdone", "Also: The Lantern Fox went to print last week!",
        "Huge congratulations! Holding the printed copy will feel amazing."),
      ),
], [
    Q("single", "What kind of animal is the user's pet?", "bunny"),
    QR("How does this user like lists of options presented?", "pref_bul1", "pref_bul2", "pref_bul3"),
    Q("single", "What does the user do for work?", "job"),
    Q("single", "Which drawing app does the user use these days?", "csp"),
    Q("single", "How does the user take her coffee?", "coffee"),
    Q("single", "What is the user's sibling called?", "marco"),
    Q("single", "What's the title of the picture book the user is illustrating?", "book"),
    Q("single", "Which city does the user live in now?", "portland"),
    Q("multi_hop", "Which city did the user leave when she moved to Portland?", "austin", "portland"),
    Q("multi_hop", "Which app did the user draw in before Clip Studio Paint, and why did she change?", "procreate", "csp"),
    Q("multi_hop", "Which project pushed the user to change drawing software?", "book", "csp"),
    Q("multi_hop", "In which city was the user living when she signed the picture book contract?", "austin", "book", "portland"),
    Q("temporal", "When did the user move to Portland?", "portland"),
    Q("temporal", "What was the deadline for the final art of the fox book?", "book"),
    Q("temporal", "When did The Lantern Fox go to print?", "bookdone"),
])

# u06 - data engineer in Toronto, Airflow -> Dagster, tabs, type hints, son Noah
add_user("u06", "en", "en", [
    S("2025-01-27 21:15",
      K("job", "Hi, I'm a data engineer at Maplewave and our Airflow DAGs are getting out of hand.",
        "Common pain. Is it scheduling, dependencies or code organisation?"),
      P("code"),
      K("hints1", "Code organisation mostly. When you show Python, please include type hints, I'm strict about that.",
        "Will do, typed examples from now on."),
      K("tabs1", "And yes, I'm one of those people who indents with tabs. Don't judge.",
        "No judgement. Consistency matters more than the choice."),
      K("k8s", "Our Airflow runs on a Kubernetes cluster I set up myself with Helm last year.",
        "Nice. The official Helm chart is a solid base for that."),
      ),
    S("2025-05-11 08:00",
      K("noah", "Weekend question: my son Noah turns four in two weeks and wants a dinosaur party. Ideas?",
        "A dino egg hunt, a fossil dig in a sand tray and a volcano cake would be a hit."),
      K("allergy", "Friends offered their house for it, but they have two cats and I'm badly allergic. Alternatives?",
        "A community centre room or a park shelter would work and avoid the allergy problem."),
      P("family"),
      K("toronto", "It'll be late May in Toronto, so outdoors might actually work.",
        "Late May is usually pleasant, just have a rain backup."),
      ),
    S("2025-09-03 19:40",
      K("dagster", "We've decided to migrate from Airflow to Dagster, and I'm leading the migration.",
        "Exciting! Dagster's asset-based model can simplify a lot."),
      K("hints2", "Can you show me a simple asset definition? Typed, like I always ask.",
        "Sure: @asset def orders() -> pd.DataFrame: ..., with typed inputs on the downstream assets."),
      P("code"),
      K("band", "Off-topic, I play bass in a band called The Static Gulls and we've got a gig on Friday.",
        "Break a leg! What kind of music do you play?"),
      T("Mostly surf rock covers.",
        "Fun. Surf rock basslines are great to play."),
      ),
    S("2026-02-22 13:10",
      K("migr_done", "The migration is finished. We switched off the last Airflow DAG yesterday.",
        "Congratulations, that's a big milestone."),
      K("tabs2", "The new repo has an editorconfig and I set it to tabs, obviously.",
        "Consistent as ever: indent_style = tab."),
      P("work"),
      T("My kid now says he wants to be a 'data plumber' like me.",
        "Ha, a future engineer!"),
      P("fitness"),
      ),
], [
    Q("single", "Which orchestrator did the user's team decide to move to?", "dagster"),
    QR("Tabs or spaces: what does this user indent with?", "tabs1", "tabs2"),
    Q("single", "What is the user's child called?", "noah"),
    Q("single", "What triggers the user's allergy?", "allergy"),
    Q("single", "Which instrument does the user perform on?", "band"),
    Q("single", "Has the user set up a Kubernetes cluster before?", "k8s"),
    QR("What must every snippet shown to this user contain?", "hints1", "hints2"),
    Q("single", "Which company does the user work at?", "job"),
    Q("multi_hop", "Is the user's company still running Airflow?", "dagster", "migr_done"),
    Q("multi_hop", "What platform hosted the orchestrator the team migrated away from?", "k8s", "dagster"),
    Q("multi_hop", "In which city does the bass player of The Static Gulls live?", "band", "toronto"),
    Q("multi_hop", "What migration did the Maplewave data engineer lead?", "job", "dagster"),
    Q("temporal", "When did the user's son turn four?", "noah"),
    Q("temporal", "When was the last Airflow DAG switched off?", "migr_done"),
    Q("temporal", "When did the user's band play a gig?", "band"),
])

# u07 - marine biology PhD in Bergen, axolotl Gizmo, APA, vegetarian -> eats fish
add_user("u07", "en", "en", [
    S("2025-03-03 22:30",
      K("phd", "I'm a PhD student in marine biology in Bergen, studying how kelp forests recover after marine heatwaves.",
        "Fascinating topic. How can I help?"),
      K("latex", "Mostly with my thesis, which I write in LaTeX. Can you help with a table that keeps overflowing the margin?",
        "Try wrapping it in \\resizebox{\\textwidth}{!}{...} or switch to tabularx with X columns."),
      K("apa1", "Also, any references you suggest should be in APA 7th edition, that's what my department requires.",
        "APA 7 it is."),
      K("cork", "I'm originally from Cork, so the Bergen rain doesn't bother me much.",
        "Good training, then!"),
      K("veg", "Quick dinner idea? I'm vegetarian, nothing fancy.",
        "A mushroom and spinach risotto or a quick black bean quesadilla."),
      ),
    S("2025-06-10 19:00",
      K("gizmo", "My axolotl Gizmo has been floating at the top of the tank. Should I worry?",
        "It can mean air gulping or water that's too warm. Keep the temperature below about 20 degrees C."),
      T("The tank is at 22 degrees with this summer heat.",
        "That's a bit warm. A clip-on fan or frozen water bottles can bring it down."),
      P("misc"),
      T("I'll ask around about a proper chiller, they're expensive though.",
        "Second-hand aquarium chillers come up fairly often, worth checking local listings."),
      P("study"),
      ),
    S("2025-11-04 17:20",
      K("fish", "Small confession: I've started eating fish again after eight years as a vegetarian. My iron was really low.",
        "That's a sensible health decision. Oily fish helps with vitamin D too."),
      K("apa2", "Can you format these three papers as references? Same style as before, APA seventh edition.",
        "Sure, paste the details and I'll format them."),
      K("jonas", "My boyfriend Jonas built a chiller for Gizmo's tank out of an old mini-fridge, and it actually works!",
        "That's impressive. Jonas deserves a medal."),
      P("food"),
      K("chapter", "I submitted my second thesis chapter to my supervisor today.",
        "Well done! Fingers crossed for kind feedback."),
      ),
    S("2026-05-22 09:00",
      K("defence", "My PhD defence is scheduled for 18 September!",
        "Exciting. Let's plan backwards from that date."),
      P("study"),
      K("postdoc", "And I've accepted a postdoc in Halifax, Nova Scotia, starting in November.",
        "Congratulations! Another rainy coastal city."),
      T("The little guy is coming with us, so I'm researching how to ship an axolotl.",
        "You'll need an insulated container and a pet shipper experienced with amphibians."),
      P("travel"),
      ),
], [
    Q("single", "What does the user research?", "phd"),
    QR("What citation style should references for this user follow?", "apa1", "apa2"),
    Q("single", "用户养的美西螈叫什么名字？", "gizmo"),
    Q("single", "What typesetting system does the user's dissertation use?", "latex"),
    Q("single", "Where did the user grow up?", "cork"),
    Q("single", "Who is Jonas?", "jonas"),
    Q("single", "Does the user eat seafood?", "fish"),
    Q("single", "What position has the user lined up for after her doctorate?", "postdoc"),
    Q("multi_hop", "What was the user's diet before she started eating fish again?", "veg", "fish"),
    Q("multi_hop", "Which city will the user move to after defending her PhD in Bergen?", "phd", "defence", "postdoc"),
    Q("multi_hop", "What kind of animal lives in the tank that Jonas built a chiller for?", "gizmo", "jonas"),
    Q("multi_hop", "What is the user's hometown, and where is she heading after the doctorate?", "cork", "postdoc"),
    Q("temporal", "When is the user's viva?", "defence"),
    Q("temporal", "When did the user stop following a meat-free diet?", "fish"),
    Q("temporal", "When does the user's next research position begin?", "postdoc"),
])

# u08 - sous chef -> food truck owner in New Orleans, bulldog Tank, grams
add_user("u08", "en", "en", [
    S("2025-02-20 23:55",
      K("job_old", "Long night. I'm sous chef at the Magnolia Room and we did 240 covers tonight.",
        "That's a huge service. Well done surviving it."),
      K("grams1", "I want to scale our gumbo recipe down for home. Give me quantities by weight in grams, never cups.",
        "Got it, weights in grams only."),
      K("cilantro", "And leave out cilantro. To me it tastes like soap, always has.",
        "No cilantro. Parsley or green onion can fill that role."),
      K("notion", "I keep all my recipes in Notion, so format it so I can paste it straight in.",
        "Sure, I'll use headings and a checklist for the ingredients."),
      K("nola", "Here in New Orleans everybody thinks their grandma's gumbo is the best, so no pressure.",
        "Tough crowd!"),
      ),
    S("2025-06-02 15:00",
      K("tank", "My English bulldog Tank has been panting a lot in this heat. Is that normal?",
        "Bulldogs struggle with heat. Walk early in the morning, give shade and water, and watch for signs of distress."),
      P("dog"),
      T("We're going to get him a cooling mat.",
        "Good idea, cooling mats help a lot for flat-faced breeds."),
      P("dog"),
      ),
    S("2025-10-15 10:30",
      K("truck", "I did it: I quit the restaurant and launched my own food truck, Bayou Byte. First service was Saturday!",
        "Congratulations! How did the first service go?"),
      T("Sold out in three hours. Po'boys and gumbo cups.",
        "Incredible start!"),
      K("grams2", "Can you help me cost out a batch of remoulade? Weights in grams again please.",
        "Sure, share the ingredient list and prices per kilo."),
      P("work"),
      K("zora", "My daughter Zora wants to help on the truck on weekends. She's twelve.",
        "Sounds like a family business in the making!"),
      ),
    S("2026-04-08 21:30",
      P("food"),
      K("permit", "The city renewed our vending permit this morning, so we're good for another year.",
        "Great news, one less thing to worry about."),
      K("keisha", "Keisha, my wife, finally got the truck's bookkeeping into a proper spreadsheet.",
        "That'll make tax season a lot easier."),
      K("zora_bday", "Zora turned thirteen yesterday. We made her a king-cake-flavoured birthday cake.",
        "Happy birthday to her! That sounds delicious."),
      T("The dog got a slice of plain sponge, don't tell the vet.",
        "Your secret's safe, as long as it was a small slice."),
      ),
], [
    Q("single", "What is the user's food truck called?", "truck"),
    Q("single", "Which herb should never appear in the user's recipes?", "cilantro"),
    QR("What units should recipe quantities be given in for this user?", "grams1", "grams2"),
    Q("single", "What breed is Tank?", "tank"),
    Q("single", "Which app does the user keep his recipes in?", "notion"),
    Q("single", "Which city does the user live in?", "nola"),
    Q("single", "How old is Zora now?", "zora_bday"),
    Q("single", "Has the food truck's vending permit been renewed?", "permit"),
    Q("multi_hop", "Where did the user work before starting Bayou Byte?", "job_old", "truck"),
    Q("multi_hop", "In which city does the user's food truck operate?", "nola", "truck"),
    Q("multi_hop", "Which family member helps on the truck at weekends, and how old is she now?", "zora", "zora_bday"),
    Q("multi_hop", "Which business does the user's spouse do the accounting for?", "keisha", "truck"),
    Q("temporal", "When was Bayou Byte's first service?", "truck"),
    Q("temporal", "When is Zora's birthday?", "zora_bday"),
    Q("temporal", "When did the city renew the vending permit?", "permit"),
])

# u09 - marketing manager -> product manager in London, cat Tofu, British spelling
add_user("u09", "en", "en", [
    S("2025-01-19 12:30",
      K("job_old", "Hiya. I'm a marketing manager at Larkspur Cosmetics and I need to tidy up a campaign brief.",
        "Happy to help. Paste it in and tell me what's bothering you about it."),
      K("brit1", "Please use British spelling when you edit: colour, organise, centre. American spellings get flagged by our brand team.",
        "Understood, British English throughout."),
      K("excel", "I live in Excel for campaign tracking, pivot tables everywhere.",
        "Pivot tables are perfect for that. Want some shortcuts?"),
      K("tofu", "My cat Tofu is asleep on the printed brief as we speak.",
        "Tofu has clearly approved it."),
      P("work"),
      ),
    S("2025-04-02 19:15",
      K("japanese", "I've started learning Japanese on an app, 30-day streak so far.",
        "Nice streak! Is hiragana sorted?"),
      T("Mostly. Katakana is harder.",
        "Try learning katakana through loanwords, like coffee and tennis."),
      K("kyoto", "The goal is a trip to Kyoto in October with my friend Amara.",
        "Lovely, October is a great time for Kyoto."),
      K("tennis", "I also play tennis on Thursday evenings at our local club in Clapham.",
        "Great way to unwind midweek."),
      P("fitness"),
      ),
    S("2025-08-21 09:45",
      K("job_new", "News: I'm moving from marketing into product. I start as a product manager at Quillon, a fintech app, in September.",
        "Congratulations, that's a big career shift!"),
      K("sql", "They do a lot of SQL there, so I'm learning it. Old spreadsheet habits die hard though.",
        "Your pivot-table thinking maps nicely onto GROUP BY."),
      K("brit2", "Can you write me a PRD template? British English please, as usual: 'prioritise', not 'prioritize'.",
        "Of course. Sections: problem, goals, non-goals, users, requirements, risks, metrics."),
      P("code"),
      ),
    S("2025-10-28 22:05",
      K("kyoto_done", "Back from Japan! Fushimi Inari at sunrise was the highlight.",
        "Sounds magical. Did the Japanese come in handy?"),
      T("A bit. I could read menus, which felt like a win.",
        "That's a real win after a few months of study!"),
      K("mum", "My mum lives in Brighton and is desperate to see the photos, so I'm making an album.",
        "A printed album would make a lovely gift."),
      P("cat"),
      ),
    S("2026-03-15 11:00",
      P("work"),
      K("brit3", "Quick one: edit this release note and keep the spelling British, please.",
        "Done. 'Optimise' and 'behaviour' kept in British spelling."),
      K("tofu_age", "Tofu turned ten this week. She's slowing down but still steals my chair.",
        "Happy tenth birthday to Tofu!"),
      ),
], [
    QR("Which spelling conventions should edits for this user follow?", "brit1", "brit2", "brit3"),
    Q("single", "What is the user's current job?", "job_new"),
    Q("single", "What's the name of the user's pet?", "tofu"),
    Q("single", "Which racket sport is the user into?", "tennis"),
    Q("single", "Which town is the user's mother based in?", "mum"),
    Q("single", "Which language is the user studying?", "japanese"),
    Q("single", "What did the user enjoy most on her recent holiday?", "kyoto_done"),
    Q("single", "Which spreadsheet tool did the user rely on in marketing?", "excel"),
    Q("multi_hop", "What was the user's job before she became a product manager?", "job_old", "job_new"),
    Q("multi_hop", "Who was the user planning to go to Kyoto with, and did the trip happen?", "kyoto", "kyoto_done"),
    Q("multi_hop", "What tool was the user used to before learning SQL for the fintech job?", "excel", "sql"),
    Q("multi_hop", "How old is the cat that slept on the campaign brief?", "tofu", "tofu_age"),
    Q("temporal", "When did the user start at Quillon?", "job_new"),
    Q("temporal", "When did the user visit Kyoto?", "kyoto_done"),
    Q("temporal", "Roughly when did the user start learning Japanese?", "japanese"),
])

# u10 - SRE, Bangalore -> Berlin, vim -> VS Code, code first
add_user("u10", "en", "en", [
    S("2025-03-11 06:30",
      K("job", "Hi, I'm an SRE at Kestrel Cloud. I need to write a runbook for etcd backups.",
        "Sure. Want steps for snapshot, verify and restore?"),
      K("codefirst1", "Yes. Show the commands first and explain after. I skim the code before I read any prose.",
        "Got it: commands first, explanation second."),
      K("k8s", "We run Kubernetes on bare metal, about 40 nodes, which I helped deploy with kubeadm.",
        "Bare-metal etcd needs careful backup scheduling, so let's include that."),
      K("vim", "I'll be editing all of this in vim, so keep the line lengths sane.",
        "Will do, under 80 characters."),
      K("blr", "Bangalore traffic means I'm working from home today anyway.",
        "Sensible choice!"),
      ),
    S("2025-07-01 20:45",
      K("berlin", "We've relocated to Berlin, landed on Saturday. Kestrel transferred me to their EU team.",
        "Welcome to Berlin! How's the family settling in?"),
      K("anika", "Anika, my daughter, starts at an international school in Prenzlauer Berg next month.",
        "Exciting. International schools are usually good at supporting new arrivals."),
      K("veg", "Finding vegetarian food has been easier than I expected here.",
        "Berlin is very vegetarian-friendly, you'll have plenty of options."),
      P("home"),
      P("travel"),
      ),
    S("2025-11-19 18:10",
      K("vscode", "I finally gave up on my old terminal editor and moved to VS Code with the Remote SSH extension. Don't tell my old team.",
        "Your secret's safe. Remote SSH is great for server work."),
      K("terraform", "Can you help me refactor our Terraform modules for the Hetzner setup?",
        "Sure. Share the module structure and we'll split state per environment."),
      K("codefirst2", "Code up front, commentary after, like last time.",
        "Here's the module layout first, then my notes."),
      P("code"),
      ),
    S("2026-05-03 14:00",
      K("cricket", "I've joined a cricket club here. Turns out there's a whole league in Berlin!",
        "Brilliant, and a good way to meet people too."),
      P("fitness"),
      K("codefirst3", "Write me a bash one-liner to find the biggest files in /var. Snippet first, explanation after, you know how I like it.",
        "du -ah /var | sort -rh | head -20 lists the 20 largest entries."),
      K("anika_cricket", "Anika wants to come along to the matches, she's learning the rules.",
        "Great for her, and the cricket teas are a bonus!"),
      ),
], [
    Q("single", "Which city does the user live in now?", "berlin"),
    QR("How should technical answers be ordered for this user?", "codefirst1", "codefirst2", "codefirst3"),
    Q("single", "Which IDE does the user currently use?", "vscode"),
    Q("single", "Has the user deployed Kubernetes on physical servers?", "k8s"),
    Q("single", "What's the user's child called?", "anika"),
    Q("single", "Does the user eat meat?", "veg"),
    Q("single", "Which company employs the user?", "job"),
    Q("single", "Which hosting provider are the user's Terraform modules for?", "terraform"),
    Q("multi_hop", "Where did the user live before Berlin?", "blr", "berlin"),
    Q("multi_hop", "What editor did the user use before switching to VS Code?", "vim", "vscode"),
    Q("multi_hop", "Which employer relocated the user to Europe, and what is his role there?", "job", "berlin"),
    Q("multi_hop", "Which of the user's pastimes does his child want to get involved in?", "anika", "anika_cricket"),
    Q("temporal", "When did the user arrive in Berlin?", "berlin"),
    Q("temporal", "When was Anika due to start at her new school?", "anika"),
    Q("temporal", "When did the user switch editors to VS Code?", "vscode"),
])

# u11 - retired teacher in Falmouth, spaniel Bramble, numbered steps
add_user("u11", "en", "en", [
    S("2025-02-08 10:15",
      K("retired", "Good morning. I'm a retired primary school teacher, forty years in the classroom, and my grandson set me up with you.",
        "Good morning! Lovely to meet you. What would you like help with?"),
      K("ipad", "I've got an iPad and I'd like to video call my daughter Rachel. Could you explain how?",
        "Of course. 1. Open FaceTime. 2. Tap the plus sign. 3. Type Rachel's name. 4. Tap the video button."),
      K("steps1", "That was perfect. Please always give me numbered steps like that, one thing at a time.",
        "I will: numbered steps, one at a time."),
      K("falmouth", "It's blowing a gale here in Falmouth today, so I'm staying in.",
        "Sounds like a good day for a cup of tea indoors."),
      P("family"),
      ),
    S("2025-05-21 14:40",
      K("tomatoes", "My tomato plants in the greenhouse have yellow leaves at the bottom. What's wrong with them?",
        "Often it's a magnesium deficiency or overwatering. An Epsom salt feed can help."),
      K("steps2", "How do I make the Epsom salt feed? Number the steps for me, dear.",
        "1. Dissolve 20 g of Epsom salts in 1 litre of water. 2. Water at the base. 3. Repeat every two weeks."),
      K("bramble", "Bramble, my springer spaniel, keeps digging up the rose bed.",
        "Spaniels love to dig! A designated digging spot with buried toys can redirect him."),
      P("dog"),
      K("leo", "My grandson Leo is coming for half term next week. He's seven and loves bugs.",
        "A bug hunt in the garden would be perfect for him."),
      ),
    S("2025-09-09 19:00",
      K("alan", "My husband Alan had his hip replaced yesterday. The operation went well.",
        "I'm glad to hear it. Wishing him a smooth recovery."),
      T("What can I do to make the house safer for him?",
        "1. Remove loose rugs. 2. Put a chair in the shower. 3. Raise the toilet seat. 4. Keep essentials at waist height."),
      P("home"),
      K("bookclub", "My book club is reading 'The Cormorant's Year' this month and I'm hosting.",
        "Lovely. Would you like some discussion questions?"),
      ),
    S("2026-01-25 11:30",
      K("steps3", "The iPad has updated and everything looks different. Can you walk me through making the text bigger? Numbered, please, like always.",
        "1. Open Settings. 2. Tap Display & Brightness. 3. Tap Text Size. 4. Drag the slider to the right."),
      P("dog"),
      K("alan_walk", "Alan walked to the harbour and back yesterday without his stick!",
        "What wonderful progress!"),
      K("bramble_walk", "Bramble trotted beside him the whole way, very proud of himself.",
        "Sounds like the perfect walking companion."),
      ),
], [
    QR("How should instructions for this user be formatted?", "steps1", "steps2", "steps3"),
    Q("single", "What breed of dog does the user have?", "bramble"),
    Q("single", "What did the user do before retiring?", "retired"),
    Q("single", "What's the name of the user's grandchild?", "leo"),
    Q("single", "Which town does the user live in?", "falmouth"),
    Q("single", "What book is the user's reading group discussing?", "bookclub"),
    Q("single", "What was wrong with the plants in the user's greenhouse?", "tomatoes"),
    Q("single", "What is the user's child called?", "ipad"),
    Q("multi_hop", "How is Alan getting on since his operation?", "alan", "alan_walk"),
    Q("multi_hop", "Which breed of dog kept the user's husband company on his walk to the harbour?", "bramble", "bramble_walk"),
    Q("multi_hop", "Who helped the user start using the assistant, and how old is he?", "retired", "leo"),
    Q("multi_hop", "In which town did the user's husband walk to the harbour without a stick?", "falmouth", "alan_walk"),
    Q("temporal", "When did Alan have hip surgery?", "alan"),
    Q("temporal", "When did the user's husband first manage a walk without his stick?", "alan_walk"),
    Q("temporal", "When was the user's grandson coming to stay?", "leo"),
])

# u12 - mechanical engineering student, gecko Pixel, analogies
add_user("u12", "en", "en", [
    S("2025-01-30 23:10",
      K("major", "hey, I'm a second-year mechanical engineering student at Ridgefield and thermodynamics is destroying me",
        "Thermo is tough at first! Which topic is giving you trouble?"),
      K("analogy1", "entropy. can you explain it with an analogy? equations alone just don't stick for me",
        "Think of a messy room: there are far more messy arrangements than tidy ones, so things drift toward mess unless you spend energy."),
      K("gecko", "lol that's my dorm room. my leopard gecko Pixel is the only tidy one here",
        "Pixel sets a high standard!"),
      K("bikeshop", "I work weekends at a bike shop called Spoke & Chain to pay for stuff",
        "Nice, hands-on mechanical experience counts too."),
      P("study"),
      ),
    S("2025-04-14 16:20",
      K("robotics", "just joined the robotics club and they write everything in C++. I only know Python",
        "The jump is manageable. Start with types, references and classes."),
      K("analogy2", "what's a pointer? and please use an analogy again, that's the only way I get it",
        "A pointer is like an address written on paper: it isn't the house, it tells you where to find it."),
      P("code"),
      K("tessa", "my girlfriend Tessa is a CS major so she's been helping me debug",
        "Handy! Pair debugging is a great way to learn."),
      P("fitness"),
      ),
    S("2025-08-24 12:00",
      K("apt", "moved out of the dorm into an apartment off campus with two roommates this weekend",
        "Exciting! More space for your reptile too."),
      P("home"),
      T("what's a cheap way to keep a gecko tank warm in a drafty apartment?",
        "An under-tank heat mat with a thermostat is cheap and safe."),
      P("food"),
      ),
    S("2026-01-12 09:40",
      K("intern", "got a summer internship at Corvane Motors! drivetrain team",
        "Congratulations! That's a great opportunity."),
      K("analogy3", "can you explain gear ratios? analogy first please, like you always do for me",
        "Picture a bike: a small front gear with a big rear gear is easy to pedal but slow. You trade speed for torque."),
      P("work"),
      K("shop_help", "the weekend bike job actually helped in the interview lol",
        "Real-world experience always stands out."),
      ),
    S("2026-06-08 18:30",
      K("intern_start", "first week at Corvane done. they have me testing gearbox prototypes",
        "Sounds like a hands-on start!"),
      K("tessa2", "Tessa got an internship in the same city so we're sharing a sublet for the summer",
        "That works out nicely!"),
      P("misc"),
      ),
], [
    Q("single", "What is the user studying?", "major"),
    QR("How does the user prefer new technical concepts to be explained?", "analogy1", "analogy2", "analogy3"),
    Q("single", "What kind of animal is Pixel?", "gecko"),
    Q("single", "Which store employs the user part-time?", "bikeshop"),
    Q("single", "Which programming language does the robotics club use?", "robotics"),
    Q("single", "What is the major of the user's partner?", "tessa"),
    Q("single", "Does the user still live in student housing?", "apt"),
    Q("single", "Which team is the user's internship with?", "intern"),
    Q("multi_hop", "Where was the user living with his gecko before he moved off campus?", "gecko", "apt"),
    Q("multi_hop", "Is the user's girlfriend living with him during the summer internship, and what is her major?", "tessa", "tessa2"),
    Q("multi_hop", "Which shop's job helped the user in his internship interview?", "bikeshop", "shop_help"),
    Q("multi_hop", "What is the user testing at the company where he got a drivetrain internship?", "intern", "intern_start"),
    Q("temporal", "When did the user move into the off-campus apartment?", "apt"),
    Q("temporal", "When did the user's internship begin?", "intern_start"),
    Q("temporal", "When did the user join the robotics club?", "robotics"),
])

# ===========================================================================
# Chinese users
# ===========================================================================

# u13 - 产品经理，杭州 -> 上海，猫年糕，喜欢简洁
add_user("u13", "zh", "zh", [
    S("2025-01-16 21:20",
      K("job", "你好，我在杭州一家叫青禾科技的公司做产品经理，最近在写一份需求文档。",
        "你好！需要我帮你梳理文档结构，还是看具体内容？"),
      K("concise1", "先帮我列个结构吧。回答简洁一点，别写太多铺垫。",
        "好的：背景、目标、用户场景、功能需求、非功能需求、验收标准。"),
      K("notion", "我平时用 Notion 写文档，你给的格式最好能直接粘贴进去。",
        "明白，我会用 Markdown 标题和列表。"),
      K("hangzhou", "杭州这几天又湿又冷，通勤路上冻得不行。",
        "南方的湿冷确实难熬，注意保暖。"),
      P("work"),
      ),
    S("2025-04-12 15:30",
      K("cat", "我家猫叫年糕，是只英短蓝猫，最近老是半夜跑酷。",
        "猫咪夜里精力旺盛很常见，睡前陪它玩一会儿会好一些。"),
      P("cat"),
      K("mango", "对了，我对芒果过敏，你推荐水果茶的时候避开芒果。",
        "好的，记住了，不推荐含芒果的饮品。"),
      K("ajie", "今天和男朋友阿杰去西湖边骑车了，风景特别好。",
        "听起来很惬意！"),
      P("food"),
      ),
    S("2025-07-26 22:10",
      K("shanghai", "上周正式搬到上海了，新公司在张江。",
        "恭喜搬家！上海的生活节奏会快一些。"),
      K("feishu", "新公司全员用飞书，以前那个文档工具基本不用了。",
        "飞书文档也挺好用，很多 Markdown 语法是通用的。"),
      K("concise2", "帮我对比一下飞书和 Notion 的权限管理？说重点就行，我不喜欢长篇大论。",
        "飞书按组织架构授权，适合企业；Notion 按页面共享，更灵活。"),
      P("home"),
      K("newjob", "新公司做跨境电商，我还是做产品，负责商家后台。",
        "方向变了但岗位一致，上手应该很快。"),
      ),
    S("2025-12-03 20:00",
      K("swim", "我最近开始学游泳了，每周二和周四晚上去。",
        "很棒！刚开始练换气会比较难，坚持就好。"),
      P("fitness"),
      K("concise3", "蛙泳怎么换气？一句话说清楚就行。",
        "手划水时抬头吸气，蹬腿时低头吐气。"),
      T("猫最近胖了，兽医说要控制饮食。",
        "可以改成定时定量喂，少给零食。"),
      ),
], [
    Q("single", "用户现在住在哪个城市？", "shanghai"),
    QR("用户喜欢什么风格的回答？", "concise1", "concise2", "concise3"),
    Q("single", "用户家的宠物叫什么？", "cat"),
    Q("single", "用户有什么水果不能吃？", "mango"),
    Q("single", "用户男朋友的名字是什么？", "ajie"),
    Q("single", "用户现在的公司用什么协同办公工具？", "feishu"),
    Q("single", "用户新培养的运动爱好是什么？", "swim"),
    Q("single", "What breed is the user's cat?", "cat"),
    Q("multi_hop", "用户搬去上海以前住在哪里？", "hangzhou", "shanghai"),
    Q("multi_hop", "用户之前在哪家公司工作？跳槽后的公司做什么业务？", "job", "newjob"),
    Q("multi_hop", "用户在改用飞书之前用的是什么文档工具？", "notion", "feishu"),
    Q("multi_hop", "用户离开青禾科技后去了哪个城市？", "job", "shanghai"),
    Q("temporal", "用户是什么时候搬到上海的？", "shanghai"),
    Q("temporal", "用户从什么时候开始学游泳？", "swim"),
    Q("temporal", "用户和阿杰去西湖骑车是哪一天？", "ajie"),
])

# u14 - 数据分析师，成都，柯基豆豆，DuckDB，喜欢代码示例
add_user("u14", "zh", "zh", [
    S("2025-02-10 20:30",
      K("job", "我在成都一家连锁超市的总部做数据分析，每天跟报表打交道。",
        "零售数据很有意思，需要帮什么忙？"),
      K("excel", "现在主要用 Excel 做周报，文件越来越大，打开都卡。",
        "数据量上来以后 Excel 确实吃力，可以考虑用 Python 或者数据库来处理。"),
      K("codeex1", "那你讲讲 pandas 怎么读大文件？最好直接给代码示例，光讲概念我记不住。",
        "可以分块读取：for chunk in pd.read_csv('a.csv', chunksize=100000): 处理 chunk。"),
      P("work"),
      K("doudou", "家里的柯基豆豆在旁边一直拱我，要出去遛弯。",
        "柯基精力旺盛，先陪它出去转转吧。"),
      ),
    S("2025-05-23 21:40",
      K("duckdb", "我用 DuckDB 做了一次全年的销售分析，几千万行数据十几秒就跑完了。",
        "DuckDB 做这种分析型查询非常快，很合适。"),
      K("codeex2", "怎么用它直接查 parquet 文件？还是老样子，给我代码。",
        "SELECT store_id, SUM(amount) FROM 'sales/*.parquet' GROUP BY store_id;"),
      P("code"),
      P("dog"),
      ),
    S("2025-09-14 07:50",
      K("python", "我们组已经不用 Excel 做周报了，全部换成 Python 脚本自动生成。",
        "自动化以后能省下不少时间。"),
      K("xiaoyu", "女儿小雨今天开学，上二年级了，早上送完她我就来上班。",
        "新学期顺利！"),
      P("family"),
      P("fitness"),
      K("marathon_plan", "我报名了十二月的成都马拉松，全程，第一次跑。",
        "勇气可嘉！离比赛还有三个月，可以按周慢慢加量。"),
      ),
    S("2025-12-21 16:30",
      K("marathon", "今天跑完了人生第一个全马，4小时38分！",
        "太厉害了，恭喜完赛！"),
      P("fitness"),
      K("codeex3", "帮我写个脚本统计每周跑量吧，给代码就行，别解释太多。",
        "df.groupby(pd.Grouper(key='date', freq='W'))['km'].sum()"),
      T("狗狗今天在家等我等得急死了。",
        "辛苦它了，回去好好陪陪它。"),
      ),
], [
    Q("single", "用户用什么工具分析过销售数据？", "duckdb"),
    QR("用户希望技术问题怎么回答？", "codeex1", "codeex2", "codeex3"),
    Q("single", "用户养的狗是什么品种？", "doudou"),
    Q("single", "用户的女儿叫什么，读几年级？", "xiaoyu"),
    Q("single", "用户在哪个城市上班？", "job"),
    Q("single", "用户团队现在用什么生成周报？", "python"),
    Q("single", "用户首个四十二公里比赛用时多少？", "marathon"),
    Q("single", "What is the name of the user's dog?", "doudou"),
    Q("multi_hop", "用户以前用什么做周报，后来换成了什么？", "excel", "python"),
    Q("multi_hop", "用户的第一个全马是哪场比赛，成绩怎么样？", "marathon_plan", "marathon"),
    Q("multi_hop", "用户在什么行业做数据分析，处理过多大的数据量？", "job", "duckdb"),
    Q("multi_hop", "用户的女儿在哪个城市上学？", "job", "xiaoyu"),
    Q("temporal", "用户是什么时候跑完第一个全程马拉松的？", "marathon"),
    Q("temporal", "小雨升二年级是哪天开学的？", "xiaoyu"),
    Q("temporal", "用户是什么时候报名成都马拉松的？", "marathon_plan"),
])

# u15 - 语文老师 -> 教育科技内容编辑，南京，泰迪饼干，喜欢表格
add_user("u15", "zh", "zh", [
    S("2025-03-06 21:00",
      K("teacher", "我是南京一所初中的语文老师，今天批了六十篇作文，眼睛都花了。",
        "辛苦了！需要我帮你整理一份评分标准吗？"),
      K("table1", "要的。你用表格列出来吧，我看表格比看大段文字清楚。",
        "好的，用表格列出评分维度、分值和说明。"),
      K("biscuit", "我家泰迪叫饼干，刚才把我的红笔叼走了。",
        "饼干也想帮你批作文呢！"),
      P("dog"),
      K("guzheng", "最近在学古筝，每周六上课，手指疼得不行。",
        "刚开始都会疼，练出茧就好了。"),
      ),
    S("2025-07-08 10:30",
      K("mom", "暑假想接我妈来南京住一阵，她一个人住在苏州。",
        "挺好的，可以多陪陪她。"),
      K("xiangcai", "她做菜爱放香菜，可我一点香菜都不吃，闻到就难受。",
        "可以让她先给你盛一份，再放香菜。"),
      P("food"),
      P("family"),
      ),
    S("2025-11-18 19:45",
      K("newjob", "告诉你个消息，我辞职了，现在在一家叫知行教育的科技公司做内容编辑，负责初中语文课程。",
        "恭喜转型！你的教学经验会很有用。"),
      K("table2", "帮我对比一下几种课程大纲的写法？还是用表格，我习惯看表格。",
        "好的，下面用表格比较三种大纲结构。"),
      P("work"),
      T("现在工作时间规律多了，终于不用改作文改到半夜。",
        "生活节奏变好是很大的收获。"),
      ),
    S("2026-04-20 14:15",
      K("guzheng_exam", "上个月古筝考过了四级！",
        "太棒了，恭喜！"),
      P("dog"),
      K("table3", "帮我列一下五级考试的曲目要求，做成表格吧。",
        "好的，下面是表格：曲目类别、要求和建议练习时间。"),
      K("biscuit_old", "饼干九岁了，最近爬楼梯有点吃力。",
        "老年犬关节容易出问题，可以带它去查查。"),
      K("mom_moved", "我妈上周正式搬来南京跟我一起住了，苏州的房子租出去了。",
        "一家人住在一起，互相有个照应。"),
      ),
], [
    Q("single", "用户的狗叫什么名字？", "biscuit"),
    QR("用户希望信息用什么形式呈现？", "table1", "table2", "table3"),
    Q("single", "用户现在做什么工作？", "newjob"),
    Q("single", "用户的母亲现在住在哪里？", "mom_moved"),
    Q("single", "用户有什么忌口？", "xiangcai"),
    Q("single", "用户业余在练什么乐器？", "guzheng"),
    Q("single", "用户的古筝过了几级？", "guzheng_exam"),
    Q("single", "What breed is the user's dog?", "biscuit"),
    Q("multi_hop", "用户转行之前是做什么的？", "teacher", "newjob"),
    Q("multi_hop", "用户每周六上课学的那件乐器考到了几级？", "guzheng", "guzheng_exam"),
    Q("multi_hop", "那只叼走红笔的狗现在多大了？", "biscuit", "biscuit_old"),
    Q("multi_hop", "用户母亲和她同住以前，原本在哪座城市生活？", "mom", "mom_moved"),
    Q("temporal", "用户什么时候换的工作？", "newjob"),
    Q("temporal", "用户什么时候通过古筝四级考试的？", "guzheng_exam"),
    Q("temporal", "用户的母亲是什么时候搬到南京的？", "mom_moved"),
])

# u16 - 后端工程师，深圳，部署过 Kubernetes，tab -> 空格，先给结论
add_user("u16", "zh", "zh", [
    S("2025-01-25 22:45",
      K("job", "我是深圳一家支付公司的后端工程师，主要写 Go。",
        "你好！需要帮什么忙？"),
      K("k8s", "我们自己部署过几套 Kubernetes 集群，现在想把监控从 Zabbix 换成 Prometheus。",
        "Prometheus 加 Grafana 是主流方案，和 K8s 集成得也好。"),
      K("concl1", "你回答的时候先给结论，再讲原因，我没时间看完一整段分析。",
        "好的，先结论后原因。"),
      K("tab", "另外我写 Python 脚本一直习惯用 tab 缩进。",
        "只要项目内统一就行。"),
      P("code"),
      ),
    S("2025-05-17 09:30",
      K("fish", "周末在家换鱼缸的水，我养了十几条孔雀鱼。",
        "孔雀鱼好养又漂亮，换水注意温差不要太大。"),
      T("换水一次换多少比较合适？",
        "每周换三分之一左右比较稳妥。"),
      K("xiaomin", "老婆小敏怀孕了，预产期在十月，我们最近在看婴儿床。",
        "恭喜！婴儿床要选有安全认证的，栏杆间距要合适。"),
      P("family"),
      ),
    S("2025-10-21 03:10",
      K("baby", "凌晨报喜：儿子昨天晚上出生了，七斤二两！",
        "恭喜恭喜！母子平安最重要。"),
      K("lele", "大名还没定，小敏想先叫他乐乐。",
        "乐乐这个小名很可爱。"),
      P("family"),
      ),
    S("2026-03-08 21:00",
      K("spaces", "现在新项目统一用四个空格缩进，CI 里加了检查，我的 tab 习惯也改掉了。",
        "跟团队规范一致是好事。"),
      K("concl2", "帮我看看 Go 里 context 超时怎么用？老规矩，先说结论。",
        "结论：用 context.WithTimeout 包住请求，并在 select 里监听 ctx.Done()。"),
      P("code"),
      K("cycling", "最近开始周末骑行了，沿着深圳湾骑一圈大概四十公里。",
        "深圳湾风景很好，注意防晒。"),
      P("fitness"),
      ),
    S("2026-08-30 20:20",
      K("concl3", "乐乐十个月了，晚上总醒，有什么办法？结论放最前面。",
        "结论：建立固定的睡前程序，并逐步减少夜奶。"),
      P("family"),
      K("bike_new", "我换了一辆公路车，以后周末能骑得更远了。",
        "恭喜换车！记得调好车架尺寸，定期保养。"),
      ),
], [
    Q("single", "用户有没有部署 Kubernetes 的经验？", "k8s"),
    QR("用户希望内容按什么顺序组织？", "concl1", "concl2", "concl3"),
    Q("single", "用户现在写代码用什么缩进？", "spaces"),
    Q("single", "用户的宠物是什么？", "fish"),
    Q("single", "用户的妻子叫什么名字？", "xiaomin"),
    Q("single", "用户儿子的小名叫什么？", "lele"),
    Q("single", "用户在哪个城市上班，写哪门编程语言？", "job"),
    Q("single", "What does the user do on weekends to exercise?", "cycling"),
    Q("multi_hop", "用户以前写 Python 用什么缩进，后来改成了什么？", "tab", "spaces"),
    Q("multi_hop", "用户的孩子预产期原本是几月，实际是哪天出生的？", "xiaomin", "baby"),
    Q("multi_hop", "用户的儿子现在多大了？", "lele", "concl3"),
    Q("multi_hop", "用户周末骑行以前在哪里骑，现在换了什么车？", "cycling", "bike_new"),
    Q("temporal", "用户的儿子是哪天出生的？", "baby"),
    Q("temporal", "用户是什么时候开始周末骑行的？", "cycling"),
    Q("temporal", "用户什么时候把缩进从 tab 改成空格的？", "spaces"),
])

# u17 - 儿科医生，北京 -> 青岛，橘猫可乐，回答全用中文
add_user("u17", "zh", "zh", [
    S("2025-02-26 23:30",
      K("doctor", "刚下夜班，我是北京一家医院的儿科医生，冬天门诊全是发烧的小孩。",
        "辛苦了！流感季儿科确实最忙。"),
      K("nozh1", "跟你说一下，回答请全部用中文，别中英文夹杂，看着累。",
        "好的，我会尽量全部用中文表达。"),
      K("cola", "家里的橘猫可乐又把我的听诊器当玩具了。",
        "橘猫好奇心重，听诊器最好收进抽屉。"),
      P("cat"),
      K("coffee", "夜班全靠咖啡续命，美式，不加糖。",
        "注意别喝太晚，影响白天补觉。"),
      ),
    S("2025-06-30 20:10",
      K("dad", "我爸上周做了心脏支架手术，恢复得还不错。",
        "那就好，术后要按时服药、定期复查。"),
      P("family"),
      K("nozh2", "术后饮食有什么要注意的？还是用中文说，别夹英文缩写。",
        "少盐少油，多吃蔬菜和全谷物，戒烟限酒，按医嘱服用抗血小板药物。"),
      K("japanese", "最近开始学日语，想以后去日本参加学术会议时能简单交流。",
        "好目标！可以先从五十音和常用会话开始。"),
      ),
    S("2025-10-12 17:00",
      K("qingdao", "我调到青岛的一家儿童医院了，上个月刚搬过来，离海边很近。",
        "恭喜！青岛环境很好，住在海边很惬意。"),
      K("cola_move", "可乐坐了一路车，到新家躲在床底下两天才出来。",
        "猫换环境需要时间，它适应得算快的。"),
      P("home"),
      K("camera", "周末拿富士相机去栈桥拍日落了。",
        "栈桥的日落很美，出片了吗？"),
      ),
    S("2026-05-16 10:00",
      K("nozh3", "帮我写一段给家长的发烧护理说明，全中文，不要出现英文。",
        "好的：体温超过38.5℃时可以按医嘱服用退烧药，多喝水，注意观察孩子的精神状态。"),
      P("work"),
      K("jlpt", "去年十二月考的日语能力考试出成绩了，三级过了！",
        "恭喜！坚持学下来很不容易。"),
      P("travel"),
      ),
], [
    Q("single", "用户现在在哪个城市工作？", "qingdao"),
    QR("用户对回答用的语言有什么要求？", "nozh1", "nozh2", "nozh3"),
    Q("single", "用户的猫叫什么，什么花色？", "cola"),
    Q("single", "用户喝咖啡有什么习惯？", "coffee"),
    Q("single", "用户是做什么职业的？", "doctor"),
    Q("single", "用户在学哪门外语，为什么学？", "japanese"),
    Q("single", "用户拍照用哪个品牌的器材？", "camera"),
    Q("single", "Did the user pass the Japanese proficiency test?", "jlpt"),
    Q("multi_hop", "用户搬到青岛以前在哪个城市上班？", "doctor", "qingdao"),
    Q("multi_hop", "用户学的那门外语考过了几级？", "japanese", "jlpt"),
    Q("multi_hop", "那只爱玩听诊器的猫搬家后表现怎么样？", "cola", "cola_move"),
    Q("multi_hop", "用户的猫现在生活在哪个城市？", "cola", "qingdao"),
    Q("temporal", "用户的父亲是什么时候做的支架手术？", "dad"),
    Q("temporal", "用户大概什么时候搬到青岛的？", "qingdao"),
    Q("temporal", "用户是什么时候参加日语能力考试的？", "jlpt"),
])

# u18 - 计算机研究生，武汉，兔子团子，吃素，喜欢分条要点
add_user("u18", "zh", "zh", [
    S("2025-03-20 23:00",
      K("student", "我是武汉一所大学计算机专业的研一学生，方向是图神经网络。",
        "很热门的方向！有什么我能帮忙的？"),
      K("pytorch", "我用 PyTorch 写模型，最近老是显存溢出。",
        "可以试试减小 batch size、用混合精度训练，或者梯度累积。"),
      K("bullets1", "你能分点说吗？我喜欢一条一条的要点，大段文字看着费劲。",
        "好的：1. 减小 batch size；2. 开混合精度；3. 梯度累积；4. 及时释放中间变量。"),
      K("tuanzi", "宿舍偷偷养了只兔子叫团子，别告诉宿管。",
        "哈哈，保密！注意别让它啃电线。"),
      P("study"),
      ),
    S("2025-06-15 12:30",
      K("veg", "我吃素，食堂能吃的不多，有什么简单的素食搭配推荐？",
        "豆腐、豆干、杂粮饭和各种青菜搭配，蛋白质基本够了。"),
      K("ielts_plan", "准备十月考雅思，想明年申请去国外交换。",
        "时间够用，建议每周做两套完整的模拟题。"),
      K("bullets2", "口语怎么练？还是分条列给我。",
        "1. 每天录音讲一个话题；2. 找搭档模拟考试；3. 积累话题词汇；4. 练习把回答展开。"),
      K("xiaozhou", "男朋友小周雅思考过 7 分，说可以陪我练口语。",
        "有人陪练效率会高很多。"),
      ),
    S("2025-10-30 21:00",
      K("ielts", "雅思成绩出来了，总分 7.5！",
        "太棒了！交换申请有底气了。"),
      P("study"),
      K("dorm", "这学期换了宿舍，搬进了新建的研究生公寓，兔子也一起搬过去了。",
        "新宿舍条件应该更好吧！"),
      P("food"),
      ),
    S("2026-04-07 19:30",
      K("intern", "我拿到星澜科技的暑期实习了，做推荐系统！",
        "恭喜！推荐系统和图神经网络关系很密切。"),
      K("bullets3", "实习前要准备什么？列要点就好。",
        "1. 复习推荐算法基础；2. 熟悉 PyTorch 分布式训练；3. 了解线上 A/B 测试。"),
      P("work"),
      K("intern_start", "七月一号入职，地点在上海。",
        "那暑假要去上海了，提前找好住处。"),
      ),
], [
    Q("single", "用户读研时研究什么课题？", "student"),
    QR("给这个用户的答复应该怎么排版？", "bullets1", "bullets2", "bullets3"),
    Q("single", "用户养了什么宠物，叫什么？", "tuanzi"),
    Q("single", "用户在饮食上有什么习惯？", "veg"),
    Q("single", "用户的男朋友叫什么？", "xiaozhou"),
    Q("single", "用户用哪个深度学习框架？", "pytorch"),
    Q("single", "用户的雅思考了多少分？", "ielts"),
    Q("single", "Which company offered the user a summer internship?", "intern"),
    Q("multi_hop", "用户考雅思是为了什么，最后考了多少分？", "ielts_plan", "ielts"),
    Q("multi_hop", "团子现在住在哪里？", "tuanzi", "dorm"),
    Q("multi_hop", "用户和她男朋友谁的雅思分数更高？", "xiaozhou", "ielts"),
    Q("multi_hop", "用户的实习方向和她的研究方向有什么联系？", "student", "intern"),
    Q("temporal", "用户是什么时候拿到雅思成绩的？", "ielts"),
    Q("temporal", "用户的实习哪天开始？", "intern_start"),
    Q("temporal", "用户什么时候搬的宿舍？", "dorm"),
])

# u19 - 川菜馆老板，广州，狗旺财，喜欢举例子
add_user("u19", "zh", "zh", [
    S("2025-04-03 15:00",
      K("restaurant", "我在广州开了一家川菜馆，叫蜀香居，开了快六年了。",
        "六年不容易！有什么想聊的？"),
      K("excel", "账目一直用 Excel 记，越记越乱。",
        "可以按日期、收入、支出、类别把表格规范一下，或者考虑专门的记账软件。"),
      K("example1", "你说的太抽象了，能不能举个例子？我喜欢看具体例子。",
        "比如：4月3日，收入，堂食，3200元；4月3日，支出，食材，1150元。"),
      K("wangcai", "店门口那条大黄狗叫旺财，是我们店的“保安”。",
        "哈哈，店狗很有人气！"),
      P("dog"),
      ),
    S("2025-06-05 22:30",
      K("son", "儿子黄俊明天高考，他比我还紧张。",
        "祝他考试顺利！让他今晚早点休息。"),
      P("family"),
      K("example2", "怎么跟孩子说才能让他放松？举几个例子，别讲大道理。",
        "比如可以说：“尽力就好，考完带你去吃火锅。”或者“你平时准备得很好，正常发挥就行。”"),
      P("food"),
      ),
    S("2025-08-10 11:00",
      K("son_uni", "黄俊被武汉一所大学的土木工程专业录取了！",
        "恭喜！土木是很扎实的专业。"),
      K("yizhang", "店里换了一套叫易账通的收银记账系统，终于不用再对着表格记账了。",
        "系统化以后对账会方便很多。"),
      P("work"),
      K("example3", "会员折扣怎么设置比较合理？你举个实际的例子给我。",
        "比如：充500送50，会员菜品九五折，每月会员日特价一道招牌菜。"),
      ),
    S("2026-03-28 10:20",
      K("branch", "第二家分店下周六在天河开业，忙疯了。",
        "恭喜开分店！开业前记得先试营业几天。"),
      P("work"),
      K("wangcai2", "旺财已经跟着我去新店“巡视”过了。",
        "哈哈，旺财也要上岗了。"),
      K("spicy", "新店想加几道不那么辣的菜，照顾广东客人的口味。",
        "可以考虑微辣版宫保鸡丁、开水白菜、蒜泥白肉。"),
      ),
], [
    Q("single", "用户开的餐馆叫什么名字？", "restaurant"),
    QR("向这个用户解释问题时最好采用什么方式？", "example1", "example2", "example3"),
    Q("single", "用户饭馆养的看门犬叫什么？", "wangcai"),
    Q("single", "用户的儿子被什么专业录取了？", "son_uni"),
    Q("single", "用户的店如今靠什么工具管账？", "yizhang"),
    Q("single", "用户计划给第二家店的菜品做什么改动？", "spicy"),
    Q("single", "用户孩子的名字是什么？", "son"),
    Q("single", "Where is the user's second branch opening?", "branch"),
    Q("multi_hop", "用户换成易账通之前是怎么记账的？", "excel", "yizhang"),
    Q("multi_hop", "蜀香居的第二家店开在哪里？", "restaurant", "branch"),
    Q("multi_hop", "那条当“保安”的狗去巡视了哪个区的新店？", "wangcai", "wangcai2", "branch"),
    Q("multi_hop", "用户的儿子高考后去了哪个城市上大学？", "son", "son_uni"),
    Q("temporal", "黄俊是哪一年参加高考的？", "son"),
    Q("temporal", "分店什么时候开业？", "branch"),
    Q("temporal", "用户什么时候换的收银记账系统？", "yizhang"),
])

# u20 - 日译中自由译者，厦门 -> 大理，猫芝麻和汤圆，喜欢详细回答
add_user("u20", "zh", "zh", [
    S("2025-01-11 10:00",
      K("job", "我是做日译中的自由译者，主要接游戏和动漫的本地化项目。",
        "很有意思的领域！需要什么帮助？"),
      K("trados", "一直用 Trados，但授权太贵了，有点肉疼。",
        "确实不便宜，也可以看看其他 CAT 工具的订阅方案。"),
      K("detail1", "你回答可以详细一点，把来龙去脉讲清楚，我不怕字多。",
        "好的，我会给出更完整的解释和背景。"),
      K("cats", "家里两只猫，芝麻和汤圆，一黑一白。",
        "好有画面感的名字！"),
      K("xiamen", "厦门冬天很舒服，我在阳台上一边晒太阳一边干活。",
        "真惬意。"),
      ),
    S("2025-04-22 16:40",
      K("yoga", "最近开始练瑜伽，久坐的腰疼好了不少。",
        "瑜伽对久坐的人很友好，坚持下去。"),
      P("fitness"),
      K("detail2", "游戏术语翻译怎么保持一致？讲详细些，最好把每一步的原因都说清楚。",
        "建议建立术语库：先提取高频术语，和客户确认译法，再导入 CAT 工具，最后在 QA 里设置一致性检查。每一步的原因我逐条解释。"),
      P("cat"),
      ),
    S("2025-08-19 20:00",
      K("dali", "我搬到大理了！房子在洱海边，月租比以前便宜一半。",
        "恭喜！大理的生活节奏很适合自由职业。"),
      K("memoq", "顺便把翻译软件换成了 memoQ，用起来还挺顺手。",
        "memoQ 的术语管理很强，适合你的项目。"),
      K("sister", "妹妹周雨十月要结婚，我要回厦门给她当伴娘。",
        "恭喜妹妹！伴娘要准备的东西不少。"),
      P("home"),
      ),
    S("2025-10-20 22:00",
      K("wedding", "昨天妹妹的婚礼办完了，累但是开心。",
        "恭喜！辛苦你了。"),
      P("travel"),
      K("detail3", "高原对猫有影响吗？你详细讲讲，别只给结论。",
        "一般影响不大，但我详细说说：缺氧适应的过程、需要观察的指标，以及什么情况要去看兽医。"),
      T("白的那只最近食欲一般，黑的倒是吃得很香。",
        "可以多观察几天，如果持续不吃要去看兽医。"),
      ),
    S("2026-07-02 09:30",
      P("work"),
      K("yoga_teacher", "我考了瑜伽教练证，周末在大理教一节小班课。",
        "太棒了，把爱好变成了副业！"),
      T("翻译和教课两边跑，时间安排得更紧了。",
        "可以把翻译项目集中在工作日上午，精力最好的时候做。"),
      ),
], [
    QR("用户希望回答详细还是简短？", "detail1", "detail2", "detail3"),
    Q("single", "用户的两只猫分别叫什么？", "cats"),
    Q("single", "用户现在用哪款翻译软件？", "memoq"),
    Q("single", "用户从事什么工作？", "job"),
    Q("single", "用户现在住在哪里？", "dali"),
    Q("single", "用户靠什么运动缓解久坐带来的不适？", "yoga"),
    Q("single", "用户家小妹的名字？", "sister"),
    Q("single", "Does the user hold any teaching certificate?", "yoga_teacher"),
    Q("multi_hop", "用户搬到大理以前住在哪座城市？", "xiamen", "dali"),
    Q("multi_hop", "用户换用 memoQ 以前用的工具有什么问题？", "trados", "memoq"),
    Q("multi_hop", "用户现在教瑜伽，她当初为什么开始练？", "yoga", "yoga_teacher"),
    Q("multi_hop", "用户回哪个城市参加妹妹的婚礼，那里是她以前住的地方吗？", "xiamen", "sister"),
    Q("temporal", "周雨的婚礼是哪一天？", "sister", "wedding"),
    Q("temporal", "用户什么时候搬到大理的？", "dali"),
    Q("temporal", "用户什么时候拿到瑜伽教练证的？", "yoga_teacher"),
])

# ===========================================================================
# Mixed-language users (English and Chinese, often code-switching)
# ===========================================================================

# u21 - Rust engineer, Singapore -> Vancouver, cat Mochi, English for tech / 中文 for life
add_user("u21", "mixed", "en", [
    S("2025-02-02 21:00",
      K("job", "Hi! I'm a backend engineer at Orchid Logistics in Singapore. We're rewriting our routing service in Rust.",
        "Nice choice for a routing service. Where are you stuck?"),
      K("lang_tech1", "Lifetimes, mostly. Btw, for code and tech stuff please answer in English, even if I ask in Chinese.",
        "Got it: technical answers in English."),
      P("en:code"),
      K("mochi", "我的猫 Mochi 又坐在键盘上了，刚才差点把代码删了。",
        "Mochi 可能也想学 Rust 吧。"),
      K("asyncstd", "We're on async-std right now, but half the ecosystem assumes tokio.",
        "That's a common pain point. Migrating is usually worth it."),
      ),
    S("2025-05-30 22:15",
      K("lang_life", "最近生活上的事情想问问你，这类问题你就用中文回答我吧。",
        "好的，生活类的问题我用中文回答。"),
      K("mom", "我妈一个人住在台北，我想每个月回去看她，但机票好贵。",
        "可以关注航空公司的促销，或者提前两三个月订票。"),
      K("boba", "对了，我每天一杯珍珠奶茶，一定要少糖少冰。",
        "少糖少冰会健康一点。"),
      P("zh:travel"),
      ),
    S("2025-09-06 08:30",
      K("move", "Big news: we moved to Vancouver last week! I'm joining Ferrous Labs as a Rust engineer.",
        "Congrats on the move and the new job!"),
      K("tokio", "At the new place everything is tokio, so I finally get to drop async-std.",
        "Nice, the tokio ecosystem is huge."),
      K("mochi_cold", "温哥华太冷了，Mochi 天天躲在暖气旁边。",
        "猫咪怕冷很正常，可以给它买个加热垫。"),
      P("en:home"),
      ),
    S("2026-02-14 19:00",
      K("lang_both", "Quick reminder: tech questions in English, 生活问题用中文，谢谢！",
        "Noted: English for tech, 中文 for everything else."),
      P("en:code"),
      K("mom_visit", "我妈下个月要来温哥华住三个月。",
        "太好了！可以提前规划一些带她出去玩的地方。"),
      P("zh:family"),
      ),
], [
    QR("What language should answers to this user's coding questions be in?", "lang_tech1", "lang_both"),
    QR("用户的生活类问题应该用什么语言回答？", "lang_life", "lang_both"),
    Q("single", "用户的猫叫什么？", "mochi"),
    Q("single", "Where does the user's mother live?", "mom"),
    Q("single", "用户喝奶茶有什么要求？", "boba"),
    Q("single", "Which Rust async runtime does the user's current team use?", "tokio"),
    Q("single", "Which company does the user work for now?", "move"),
    Q("single", "用户现在住在哪个城市？", "move"),
    Q("multi_hop", "Where did the user live before Vancouver, and which company did he work for there?", "job", "move"),
    Q("multi_hop", "Which async runtime did the user use at his previous job?", "asyncstd", "tokio"),
    Q("multi_hop", "用户的猫到了新城市以后有什么变化？", "mochi", "mochi_cold"),
    Q("multi_hop", "用户的妈妈要从哪里过来看他？", "mom", "mom_visit"),
    Q("temporal", "When did the user move to Vancouver?", "move"),
    Q("temporal", "用户的妈妈什么时候来温哥华？", "mom_visit"),
    Q("temporal", "How long has the user been at Ferrous Labs?", "move"),
])

# u22 - biostatistics PhD in Boston -> San Diego, dog Coco, tidyverse
add_user("u22", "mixed", "en", [
    S("2025-03-14 22:00",
      K("phd", "Hi, I'm a biostatistics PhD student in Boston and I need help with a mixed-effects model in R.",
        "Happy to help. What's the outcome and the grouping structure?"),
      K("tidy1", "Repeated blood pressure measurements per patient. And please write R in tidyverse style, I hate base R syntax.",
        "Sure: dplyr for the prep, then lmer(bp ~ time + (1 | patient)) from lme4."),
      K("coco", "My dog Coco, a little poodle mix, is judging me for working this late.",
        "Coco might have a point!"),
      P("en:dog"),
      K("jess", "My roommate Jess is a nurse and she's on nights this week, so it's just me and the dog.",
        "A quiet night for stats, at least."),
      ),
    S("2025-06-21 19:30",
      K("hotpot", "周末想在家做火锅，波士顿哪里买得到火锅底料？",
        "亚洲超市一般都有，唐人街的超市选择更多。"),
      K("parents", "我爸妈在昆明，他们想来波士顿看我毕业。",
        "太好了，可以提前帮他们准备签证材料。"),
      P("zh:food"),
      K("tidy2", "对了，R 代码还是用 tidyverse 写，管道符那种。",
        "好的，继续用 |> 或 %>% 的写法。"),
      ),
    S("2025-12-09 14:00",
      K("offer", "I got an offer! Biostatistician at Halcyon Therapeutics in San Diego, starting June.",
        "Congratulations! That's a great role."),
      P("en:work"),
      K("coco_move", "Coco 要跟我一起搬去加州，她应该会喜欢海边。",
        "Coco 一定会爱上海滩的。"),
      K("defend", "答辩定在四月十号。",
        "加油！还有四个月，可以开始准备了。"),
      ),
    S("2026-07-12 10:00",
      K("sd", "Settled in San Diego now, first month at the new job done.",
        "Glad to hear it! How's the work?"),
      K("tidy3", "Lots of survival analysis. Show me a Kaplan-Meier plot in R, tidyverse-friendly as always.",
        "Use survival plus ggsurvfit: survfit2(Surv(time, status) ~ arm, data = df) |> ggsurvfit()."),
      P("zh:home"),
      K("jess2", "Jess 还在波士顿，我们每周视频一次。",
        "保持联系很好。"),
      ),
], [
    QR("What coding style does the user want for R code?", "tidy1", "tidy2", "tidy3"),
    Q("single", "用户的狗叫什么，是什么品种？", "coco"),
    Q("single", "What is the profession of the person the user shares a flat with?", "jess"),
    Q("single", "用户的父母住在哪里？", "parents"),
    Q("single", "Which company does the user work at?", "offer"),
    Q("single", "用户周末想在家做什么吃？", "hotpot"),
    Q("single", "用户读博读的是什么专业？", "phd"),
    Q("single", "用户新工作主要做哪类分析？", "tidy3"),
    Q("multi_hop", "Where did the user live before moving to San Diego?", "phd", "sd"),
    Q("multi_hop", "用户那只贵宾混血狗现在住在哪个城市？", "coco", "coco_move", "sd"),
    Q("multi_hop", "Who stayed behind in Boston when the user moved, and what is her job?", "jess", "jess2"),
    Q("multi_hop", "What job did the user take after her biostatistics doctorate?", "phd", "offer"),
    Q("temporal", "用户的博士答辩是哪天？", "defend"),
    Q("temporal", "When did the user receive the job offer from Halcyon?", "offer"),
    Q("temporal", "How long has the user been living in San Diego?", "sd"),
])

# u23 - product designer in Shanghai, Loomwork -> own studio, shiba Bao, TL;DR first
add_user("u23", "mixed", "en", [
    S("2025-01-08 23:30",
      K("job", "Hey, I'm a product designer working remotely from Shanghai for a US startup called Loomwork.",
        "Nice. The time-zone overlap must be interesting."),
      K("standup", "Yeah, my standups are at 11pm.",
        "Ouch. Maybe negotiate async standups a few days a week?"),
      K("tldr1", "Good idea. And could you start long answers with a one-line TL;DR? I skim.",
        "Will do, TL;DR first."),
      K("bao", "我的柴犬 Bao 每天晚上都在会议里乱叫。",
        "柴犬很有个性，哈哈。"),
      P("en:work"),
      ),
    S("2025-05-04 18:00",
      K("climb", "最近迷上了抱石，每周去三次岩馆。",
        "抱石很锻炼全身力量，注意保护手指。"),
      K("weekdayveg", "我工作日吃素，周末才吃肉，有没有高蛋白的素食推荐？",
        "豆腐、天贝、毛豆、鹰嘴豆、扁豆都是不错的选择。"),
      K("tldr2", "抱石手指受伤了怎么办？先给我一句话总结再展开。",
        "一句话：先休息冰敷，疼痛持续就去看医生。下面展开说。"),
      P("zh:fitness"),
      ),
    S("2025-10-01 12:00",
      K("studio", "I quit Loomwork last month and started my own design studio, Kite Studio.",
        "Congrats on going independent!"),
      K("sister", "我姐张琳在伦敦，她帮我介绍了第一个客户。",
        "有家人帮忙太好了。"),
      P("en:work"),
      K("bao2", "Bao is now the official studio mascot.",
        "Every studio needs a mascot!"),
      ),
    S("2026-06-20 09:00",
      K("tldr3", "Explain how to price a design retainer. TL;DR on top please, you know the drill.",
        "TL;DR: estimate monthly hours times your rate, then add 10-20% for guaranteed availability. Details below."),
      K("hire", "Kite Studio 上个月招了第一个员工，一个叫小林的插画师。",
        "团队扩大了，恭喜！"),
      P("zh:work"),
      P("en:fitness"),
      ),
], [
    QR("What should lengthy responses to this user open with?", "tldr1", "tldr2", "tldr3"),
    Q("single", "用户的狗是什么品种？", "bao"),
    Q("single", "用户平时的饮食习惯是怎样的？", "weekdayveg"),
    Q("single", "What sport is the user into?", "climb"),
    Q("single", "用户的姐姐住在哪里？", "sister"),
    Q("single", "What's the name of the user's design studio?", "studio"),
    Q("single", "Kite Studio 招的第一个员工是谁？", "hire"),
    Q("single", "Which city is the user based in?", "job"),
    Q("multi_hop", "Which company did the user leave to start Kite Studio, and what was his role there?", "job", "studio"),
    Q("multi_hop", "Who was the first person the user hired after going independent from the US startup?", "studio", "hire"),
    Q("multi_hop", "用户的柴犬现在在工作室里是什么身份？", "bao", "bao2"),
    Q("multi_hop", "What time were the user's standups at his previous job?", "standup", "studio"),
    Q("temporal", "用户是什么时候离开 Loomwork 的？", "studio"),
    Q("temporal", "When did Kite Studio hire its first employee?", "hire"),
    Q("temporal", "When did the user get into bouldering?", "climb"),
])

# u24 - English teacher, Toronto -> Chengdu, cat Latte, prefers tables, spice tolerance changes
add_user("u24", "mixed", "en", [
    S("2025-02-17 09:00",
      K("move", "Hi! I moved from Toronto to Chengdu two weeks ago to teach English at an international school.",
        "Welcome to Chengdu! How are you settling in?"),
      K("spice1", "The food is amazing but way too spicy for me. I honestly can't handle any chili.",
        "You can ask for bu la (not spicy) or wei la (mildly spicy) when ordering."),
      K("latte", "My cat Latte flew over with me and she is not impressed.",
        "Long flights are stressful for cats. Give her a few quiet days."),
      K("table1", "When you compare things for me, tables please. Much easier than paragraphs.",
        "Tables it is."),
      P("en:cat"),
      ),
    S("2025-06-09 20:00",
      K("ming", "我男朋友阿明是成都本地人，他在教我做川菜。",
        "有本地人教，进步一定很快！"),
      K("cooking", "今天学了麻婆豆腐，关键是豆瓣酱要炒出红油。",
        "对，这一步决定了颜色和香味。"),
      K("table2", "帮我比较一下郫县豆瓣和普通豆瓣酱？用表格。",
        "好的，下面用表格比较原料、发酵时间、口味和用途。"),
      P("zh:food"),
      ),
    S("2025-11-22 21:00",
      K("spice2", "Update: I can now eat 中辣 without crying. This city has changed me.",
        "Ha, that's real progress!"),
      K("school", "学校让我明年当十年级的年级组长。",
        "恭喜！责任更大了。"),
      P("en:work"),
      K("latte2", "Latte 学会了开柜门偷猫粮。",
        "聪明的猫咪！可以装个儿童锁。"),
      ),
    S("2026-09-05 18:30",
      K("table3", "Compare three Chengdu neighbourhoods for renting. Table format, like I always ask.",
        "Here's a table comparing rent, commute and amenities."),
      K("rent", "阿明和我打算下个月一起搬到玉林那边住。",
        "玉林生活气息很浓，很适合。"),
      P("zh:home"),
      P("en:travel"),
      ),
], [
    QR("How does the user want comparisons presented?", "table1", "table2", "table3"),
    Q("single", "用户的猫叫什么名字？", "latte"),
    Q("single", "Where is the user's boyfriend from?", "ming"),
    Q("single", "How much spice can the user handle these days?", "spice2"),
    Q("single", "用户学会了做哪道川菜？", "cooking"),
    Q("single", "What does the user do for work in Chengdu?", "move"),
    Q("single", "用户明年在学校会担任什么职务？", "school"),
    Q("single", "用户打算搬到成都的哪个片区？", "rent"),
    Q("multi_hop", "How has the user's tolerance for spicy food changed since arriving in Chengdu?", "spice1", "spice2"),
    Q("multi_hop", "用户那只从多伦多飞过来的猫最近掌握了什么新本领？", "latte", "latte2"),
    Q("multi_hop", "用户打算和谁一起搬家？他是哪里人？", "ming", "rent"),
    Q("multi_hop", "What does the user instruct students in, and which leadership role will she take on next year?", "move", "school"),
    Q("temporal", "When did the user arrive in Chengdu?", "move"),
    Q("temporal", "用户大概从什么时候开始能吃中辣的？", "spice2"),
    Q("temporal", "用户和阿明计划什么时候搬家？", "rent"),
])


# ===========================================================================
# Build
# ===========================================================================

def _lang_of(text: str) -> str:
    return "zh" if CJK.search(text) else "en"


def _user_gap(text: str, seq: int) -> int:
    """Seconds between the previous assistant reply and the next user turn."""
    return 35 + 2 * len(text) + (seq * 17) % 50


def _assistant_gap(reply: str, seq: int) -> int:
    return 3 + len(reply) // 20 + seq % 4


def build():
    messages: list[dict] = []
    questions: list[dict] = []
    restated_qids: set[str] = set()
    pool_pos: Counter = Counter()
    ack_pos: Counter = Counter()
    qn = 0
    for u in USERS:
        uid = u["uid"]
        keymap: dict[str, str] = {}
        used_pool: set[tuple] = set()
        for si, (start, turns) in enumerate(u["sessions"], 1):
            sid = f"{uid}-s{si}"
            t = datetime.strptime(start, "%Y-%m-%d %H:%M")
            seq = 0
            for key, text, reply in turns:
                if key == "@pool":
                    lang, topic = text.split(":") if ":" in text else (u["pool_lang"], text)
                    items = POOLS[(lang, topic)]
                    for _ in range(len(items)):
                        idx = pool_pos[(lang, topic)] % len(items)
                        pool_pos[(lang, topic)] += 1
                        if (lang, topic, idx) not in used_pool:
                            break
                    else:
                        raise AssertionError(f"{uid}: pool {lang}:{topic} exhausted")
                    used_pool.add((lang, topic, idx))
                    text, reply = items[idx]
                    key = None
                if reply is None:
                    lang = _lang_of(text)
                    reply = ACKS[lang][ack_pos[lang] % len(ACKS[lang])]
                    ack_pos[lang] += 1
                if seq == 0:
                    t += timedelta(seconds=(len(text) * 7) % 60)
                else:
                    t += timedelta(seconds=_user_gap(text, seq))
                seq += 1
                mid = f"{sid}-m{seq}"
                messages.append({"user_id": uid, "session_id": sid, "msg_seq": seq, "role": "user",
                                 "content": text, "ts": t.strftime(TS_FMT), "message_id": mid})
                if key is not None:
                    assert key not in keymap, f"{uid}: duplicate key {key}"
                    keymap[key] = mid
                t += timedelta(seconds=_assistant_gap(reply, seq))
                seq += 1
                messages.append({"user_id": uid, "session_id": sid, "msg_seq": seq, "role": "assistant",
                                 "content": reply, "ts": t.strftime(TS_FMT), "message_id": f"{sid}-m{seq}"})
        for q in u["questions"]:
            qn += 1
            qid = f"q{qn:03d}"
            missing = [k for k in q["keys"] if k not in keymap]
            assert not missing, f"{uid} {qid}: unknown evidence keys {missing}"
            questions.append({"question_id": qid, "user_id": uid, "query": q["query"],
                              "lang": _lang_of(q["query"]), "category": q["category"],
                              "evidence": [keymap[k] for k in q["keys"]]})
            if q["restated"]:
                restated_qids.add(qid)
    return messages, questions, restated_qids


def _dump_jsonl(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ===========================================================================
# Lexical overlap between a query and its evidence (for the README stats)
# ===========================================================================
EN_STOP = set("""
a an the and or of to in on at for with by from into about after before since as is are was
were be been being do does did has have had can could should would will what which when where
who whom whose why how this that these those it its he she him her his hers they them their
user user's users i me my we our you your any ever now currently these days still there
long ago many much name named called kind sort does did get got one ones how's what's
""".split())
ZH_STOP_BIGRAMS = {"用户", "现在", "之前", "以前", "时候", "怎么", "怎样", "多少", "名字",
                   "没有", "一个", "一天", "什么", "哪个", "哪里", "哪天", "哪一", "一年",
                   "有什"}
ZH_FUNC = set("的了吗呢么是哪几？，。")


def _units(text: str) -> set[str]:
    out: set[str] = set()
    for tok in re.findall(r"[a-z0-9][a-z0-9'\-]*", text.lower()):
        tok = tok.strip("'-")
        if tok.endswith("'s"):
            tok = tok[:-2]
        if len(tok) < 3 or tok in EN_STOP:
            continue
        if len(tok) > 4 and tok.endswith("s") and not tok.endswith("ss"):
            tok = tok[:-1]
        out.add(tok)
    for run in re.findall(r"[\u4e00-\u9fff]+", text):
        for i in range(len(run) - 1):
            bg = run[i:i + 2]
            if bg in ZH_STOP_BIGRAMS or any(c in ZH_FUNC for c in bg):
                continue
            out.add(bg)
    return out


def overlap_stats(questions: list[dict], by_id: dict[str, dict]) -> dict:
    none = partial = high = 0
    for q in questions:
        qu = _units(q["query"])
        eu: set[str] = set()
        for mid in q["evidence"]:
            eu |= _units(by_id[mid]["content"])
        share = len(qu & eu) / len(qu) if qu else 0.0
        if share == 0:
            none += 1
        elif share < 0.5:
            partial += 1
        else:
            high += 1
    return {"none": none, "partial": partial, "high": high}


# ===========================================================================
# Validation (reads the written files back)
# ===========================================================================
MSG_KEYS = ["user_id", "session_id", "msg_seq", "role", "content", "ts", "message_id"]
Q_KEYS = ["question_id", "user_id", "query", "lang", "category", "evidence"]


def validate(restated_qids: set[str]) -> dict:
    msgs = _read_jsonl(SESSION_LOG)
    qs = _read_jsonl(QUESTIONS)
    ts_re = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")

    by_id: dict[str, dict] = {}
    sessions: dict[str, list[dict]] = defaultdict(list)
    user_sessions: dict[str, list[str]] = defaultdict(list)
    for m in msgs:
        assert list(m.keys()) == MSG_KEYS, f"bad message keys {list(m.keys())}"
        assert isinstance(m["msg_seq"], int) and m["msg_seq"] >= 1
        assert m["role"] in ("user", "assistant")
        assert isinstance(m["content"], str) and m["content"] and m["content"] == m["content"].strip()
        assert ts_re.match(m["ts"]) and TS_MIN <= m["ts"] <= TS_MAX, m["ts"]
        datetime.strptime(m["ts"], TS_FMT)
        assert re.fullmatch(r"u\d{2}", m["user_id"])
        assert re.fullmatch(re.escape(m["user_id"]) + r"-s\d+", m["session_id"]), m["session_id"]
        assert m["message_id"] == f"{m['session_id']}-m{m['msg_seq']}"
        assert m["message_id"] not in by_id, f"duplicate message_id {m['message_id']}"
        by_id[m["message_id"]] = m
        if m["session_id"] not in sessions:
            user_sessions[m["user_id"]].append(m["session_id"])
        sessions[m["session_id"]].append(m)

    assert len(user_sessions) >= 24, "need at least 24 users"
    for uid, sids in user_sessions.items():
        assert 3 <= len(sids) <= 6, f"{uid}: {len(sids)} sessions"
        assert sids == [f"{uid}-s{i}" for i in range(1, len(sids) + 1)], f"{uid}: session order"
        prev_ts = ""
        for sid in sids:
            ms = sessions[sid]
            assert 6 <= len(ms) <= 14, f"{sid}: {len(ms)} messages"
            assert [m["msg_seq"] for m in ms] == list(range(1, len(ms) + 1)), f"{sid}: seq"
            for i, m in enumerate(ms):
                assert m["role"] == ("user" if i % 2 == 0 else "assistant"), f"{sid}: alternation"
                assert m["ts"] > prev_ts, f"{m['message_id']}: ts not increasing"
                prev_ts = m["ts"]

    # language group of each user: share of user turns containing CJK
    groups: dict[str, str] = {}
    for uid, sids in user_sessions.items():
        turns = [m for sid in sids for m in sessions[sid] if m["role"] == "user"]
        zh = sum(1 for m in turns if CJK.search(m["content"])) / len(turns)
        groups[uid] = "zh" if zh > 0.9 else ("en" if zh < 0.1 else "mixed")
    gcount = Counter(groups.values())
    n_users = len(groups)
    assert 0.4 <= gcount["en"] / n_users <= 0.6, gcount
    assert 0.25 <= gcount["zh"] / n_users <= 0.4, gcount
    assert gcount["mixed"] >= 2, gcount

    qids = set()
    cat = Counter()
    lang = Counter()
    for q in qs:
        assert list(q.keys()) == Q_KEYS, f"bad question keys {list(q.keys())}"
        assert q["question_id"] not in qids, f"duplicate {q['question_id']}"
        qids.add(q["question_id"])
        assert q["user_id"] in groups
        assert q["lang"] in ("en", "zh") and q["lang"] == _lang_of(q["query"]), q["question_id"]
        assert q["category"] in ("single", "multi_hop", "temporal")
        ev = q["evidence"]
        assert isinstance(ev, list) and ev and len(set(ev)) == len(ev), q["question_id"]
        for mid in ev:
            assert mid in by_id, f"{q['question_id']}: unknown evidence {mid}"
            assert by_id[mid]["user_id"] == q["user_id"], f"{q['question_id']}: foreign evidence {mid}"
            assert by_id[mid]["role"] == "user", f"{q['question_id']}: non-user evidence {mid}"
        n_sess = len({by_id[mid]["session_id"] for mid in ev})
        if q["category"] == "single":
            if q["question_id"] in restated_qids:
                assert len(ev) >= 2 and n_sess == len(ev), f"{q['question_id']}: restatements"
            else:
                assert len(ev) == 1, f"{q['question_id']}: single needs one turn"
        elif q["category"] == "multi_hop":
            assert 2 <= len(ev) <= 3 and n_sess >= 2, f"{q['question_id']}: multi_hop evidence"
        else:
            assert 1 <= len(ev) <= 2, f"{q['question_id']}: temporal evidence"
        cat[q["category"]] += 1
        lang[q["lang"]] += 1
    assert restated_qids <= qids
    n = len(qs)
    assert n >= 330, f"only {n} questions"
    assert 0.50 <= cat["single"] / n <= 0.60, cat
    assert 0.20 <= cat["multi_hop"] / n <= 0.30, cat
    assert 0.15 <= cat["temporal"] / n <= 0.25, cat
    assert lang["zh"] >= 100, lang
    for uid in groups:
        ucats = {q["category"] for q in qs if q["user_id"] == uid}
        assert ucats == {"single", "multi_hop", "temporal"}, f"{uid}: missing categories"

    ov = overlap_stats(qs, by_id)
    assert 0.35 <= ov["none"] / n <= 0.65, ov  # roughly half the queries are paraphrased

    cat_lang = Counter((q["category"], q["lang"]) for q in qs)
    cross = sum(1 for q in qs
                if q["lang"] not in {_lang_of(by_id[mid]["content"]) for mid in q["evidence"]})
    return {
        "users": n_users, "groups": dict(gcount), "sessions": len(sessions), "messages": len(msgs),
        "user_turns": sum(1 for m in msgs if m["role"] == "user"),
        "questions": n, "category": dict(cat), "lang": dict(lang), "cat_lang": cat_lang,
        "restated": len(restated_qids), "overlap": ov, "cross": cross,
        "ts_min": min(m["ts"] for m in msgs), "ts_max": max(m["ts"] for m in msgs),
        "evidence_turns": len({mid for q in qs for mid in q["evidence"]}),
    }


# ===========================================================================
# README
# ===========================================================================

def write_readme(st: dict) -> None:
    cl = st["cat_lang"]
    rows = []
    for c in ("single", "multi_hop", "temporal"):
        rows.append(f"| {c} | {cl[(c, 'en')]} | {cl[(c, 'zh')]} | {cl[(c, 'en')] + cl[(c, 'zh')]} |")
    rows.append(f"| **total** | {st['lang'].get('en', 0)} | {st['lang'].get('zh', 0)} | {st['questions']} |")
    ov = st["overlap"]
    g = st["groups"]
    text = f"""# recall_quality development set

Labelled development data for the long-term-memory recall benchmark: multi-session
user/assistant conversations plus questions whose answer evidence is specific user turns.
Generated by `../make_devset.py` (stdlib only, deterministic; re-running gives
byte-identical files). Do not edit these files by hand; edit the generator.

## Files

- `session_log.jsonl`: one message per line with keys `user_id`, `session_id`,
  `msg_seq` (1-based within session), `role` (`user`/`assistant`), `content`,
  `ts` (`YYYY-MM-DD HH:MM:SS`, UTC), `message_id` (`<session_id>-m<msg_seq>`).
- `questions.jsonl`: `question_id`, `user_id`, `query`, `lang` (`en`/`zh`),
  `category` (`single`/`multi_hop`/`temporal`), `evidence` (list of user-turn message_ids).

## Counts

- Users: {st['users']} ({g.get('en', 0)} English, {g.get('zh', 0)} Chinese, {g.get('mixed', 0)} mixed English/Chinese)
- Sessions: {st['sessions']} (3-6 per user, 6-14 messages each), {st['ts_min'][:10]} to {st['ts_max'][:10]}
- Messages: {st['messages']} ({st['user_turns']} user turns, {st['evidence_turns']} of them cited as evidence)
- Questions: {st['questions']}

| category | en | zh | total |
|---|---|---|---|
{chr(10).join(rows)}

## Labelling conventions

- `single`: one user turn answers the question. Exception: {st['restated']} questions about
  a preference the user restated in 2-3 sessions in different words list every
  restatement as evidence; any one of them suffices.
- `multi_hop`: 2-3 user turns from at least two sessions are needed (e.g. an entity
  introduced by name in one session and described in another, or an old and a new
  value of a changed fact: "where did X live before moving to Paris").
- `temporal`: "when / how long ago" questions; the evidence turn describes a datable event,
  often relatively ("yesterday", "last week", "next month"), so the answer must be
  derived from the turn's `ts`. A few need two turns (e.g. time between two events).
- Changed facts (city, job, tool, indentation style, diet, spice tolerance): "now"
  questions cite only the newer turn.
- Queries are in the user's language (either language for mixed users); {st['cross']}
  are cross-language, i.e. no evidence turn is in the query's language.

## Difficulty by design

- Per-user scoping matters: many users share vocabulary (pets, jobs, cities, food,
  tools) and even names (a beagle and a rabbit both called Biscuit plus a poodle called
  饼干; a cat and a gecko both called Pixel; several users mention Kubernetes, DuckDB,
  tabs/spaces or table formatting).
- On-topic distractor turns surround the evidence (general dog questions around the one
  turn that names the dog, a neighbour's dog, a dog that died, an assistant reply that
  repeats the keyword). Generic distractors come from small hand-written pools and
  some recur across users.
- Lexical overlap between query and evidence (content words / CJK bigrams): none for
  {ov['none']} questions, under 50% for {ov['partial']}, 50% or more for {ov['high']}.

## How it was made

All conversations, questions and labels are written out directly in
`make_devset.py` (invented people, companies and events; no real personal data). The
generator makes no LLM or network calls: it lays the turns out as sessions, draws the
generic distractors from the pools in round-robin order, fills in timestamps and ids,
and validates the output: schema, id uniqueness, evidence existence/ownership/role, session and message
counts, timestamp order and range, category and language quotas, overlap share.
"""
    with open(README, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def main() -> int:
    DATA.mkdir(parents=True, exist_ok=True)
    messages, questions, restated = build()
    _dump_jsonl(SESSION_LOG, messages)
    _dump_jsonl(QUESTIONS, questions)
    st = validate(restated)
    write_readme(st)
    print(f"users={st['users']} groups={st['groups']} sessions={st['sessions']} "
          f"messages={st['messages']} questions={st['questions']}")
    print(f"category={st['category']} lang={st['lang']} restated={st['restated']} cross_lang={st['cross']} overlap={st['overlap']}")
    print("validation OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
