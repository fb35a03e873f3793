"""简体中文 for the page's compare views (see zh_ui.py for the conventions; the terms are
zh_ui's: 快捷连接, 层归一化, logit 透镜 ...). ``SAME_IN_CHINESE_COMPARE``: compare texts the page
shows as they are in both languages (the models' short names, config keys)."""

SAME_IN_CHINESE_COMPARE = ("pre-LN", "A · {what}", "B · {what}", "emb_dim {n}",
                           "dropout {n:g}", "{name}: {why}")

ZH_COMPARE: dict[str, str] = {
    # Build tab: pinning, the two models' parameters and diagrams
    "**Compare two models:** pin this one as **B**, then build, load or train another "
    "(**A**): every tab shows both.":
        "**比较两个模型：**把当前模型固定为 **B**，再构建、加载或训练另一个（**A**）："
        "每个标签页都会同时显示两者。",
    "Pin this model as B": "把此模型固定为 B",
    "Unpin B": "取消固定 B",
    "**B (pinned):** {weights}, {layers} layers. Build, load or train another model: it "
    "becomes **A**, and every tab shows A beside B (a difference is A − B).":
        "**B（已固定）：**{weights}，{layers} 层。构建、加载或训练另一个模型：它成为 **A**，"
        "每个标签页都会把 A 与 B 并排显示（差异一律为 A − B）。",
    "No model is pinned.": "没有固定的模型。",
    "No model is pinned: pin one in the Build tab first.":
        "没有固定的模型：请先在“构建”标签页固定一个。",
    " Compared with **B (pinned)**: {what}, {n:,} parameters, weights: **{weights}**.":
        " 对照模型 **B（已固定）**：{what}，{n:,} 个参数，权重：**{weights}**。",
    "**A** — {a} · **B (pinned)** — {b}": "**A** — {a} · **B（已固定）** — {b}",
    "the same model": "同一个模型",
    "shortcut": "有快捷连接",
    "tied head": "输出头共享权重",
    "untied head": "输出头不共享权重",
    "learned positions": "可学习位置嵌入",
    "qkv bias": "有 qkv 偏置",
    "no qkv bias": "无 qkv 偏置",
    "{n} layers": "{n} 层",
    "{n} heads": "{n} 个头",
    "feed-forward ×{n}": "前馈 ×{n}",
    "vocab {n:,}": "词表 {n:,}",
    "context {n:,}": "上下文 {n:,}",
    "Parameters of A and B": "A 与 B 的参数",
    "A: {a} · B: {b} · A − B: {diff}": "A：{a} · B：{b} · 差异 A − B：{diff}",
    "none": "无",
    "same": "相同",
    "What differs": "不同之处",
    "(outlined in both diagrams)": "（在两张结构图中都已描边标出）",
    "A and B are the same model: nothing differs.": "A 与 B 是同一个模型：没有任何差异。",
    "Same architecture, different weights: A {a}; B {b}.":
        "结构相同，权重不同：A {a}；B {b}。",
    "Memory for the weights: A **{a:,.2f} MB** ({dtype_a}), B **{b:,.2f} MB** ({dtype_b}); "
    "the two together **{both:,.2f} MB** of the {budget:,.0f} MB budget. Shared cache: "
    "{models} model(s), {used:,.0f} MB.":
        "权重所需内存：A **{a:,.2f} MB**（{dtype_a}），B **{b:,.2f} MB**（{dtype_b}）；"
        "两者合计 **{both:,.2f} MB**，预算为 {budget:,.0f} MB。共享缓存：{models} 个模型，"
        "{used:,.0f} MB。",
    # Inside the forward pass
    "{n} tokens · traced in {ms_a:.0f} ms (A) and {ms_b:.0f} ms (B) · A: {a} · B: {b}":
        "{n} 个词元 · 追踪用时 {ms_a:.0f} ms（A）和 {ms_b:.0f} ms（B） · A：{a} · B：{b}",
    "The prompt has {n} tokens but model {name}'s context_length is {most}: shorten it to at "
    "most {most} tokens to compare the two.":
        "提示词有 {n} 个词元，但模型 {name} 的 context_length 是 {most}："
        "请缩短到最多 {most} 个词元再比较两者。",
    "Statistics across layers: A and B": "各层统计量：A 与 B",
    "A − B: nothing both models recorded": "A − B：两个模型没有共同记录的量",
    "A − B: zero at every layer (the two agree)": "A − B：每一层都为零（两者一致）",
    "largest |A − B| over layers 0–{last}: {parts}": "第 0–{last} 层上最大的 |A − B|：{parts}",
    "A has {a} layers, B {b}: only {who} has layers {first}–{last} (not compared)":
        "A 有 {a} 层，B 有 {b} 层：只有 {who} 有第 {first}–{last} 层（不作比较）",
    "{name} has no {point}": "{name} 没有 {point}",
    "{name}: pre-LN, norm1 normalises the block input and attention reads its output":
        "{name}：pre-LN，norm1 先把块的输入归一化，注意力读取它的输出",
    "{name}: post-LN, attention reads the block input (not normalised); norm1 normalises the "
    "sum after attention":
        "{name}：post-LN，注意力直接读取块的输入（未归一化）；norm1 在注意力之后把和归一化",
    "{name}: no LayerNorm, attention reads the block input; nothing is normalised":
        "{name}：无层归一化，注意力读取块的输入；没有任何归一化",
    "Distribution of values in layer {layer}: A and B": "第 {layer} 层的数值分布：A 与 B",
    "Distribution of values at the final norm: A and B": "最终归一化处的数值分布：A 与 B",
    "{name} has no layer {layer} (its layers: 0 to {last})":
        "{name} 没有第 {layer} 层（它的层：0 到 {last}）",
    "measured at: {label} ({point}); one colour scale for both":
        "测量位置：{label}（{point}）；两者共用一个色标",
    "{stat} per token: A and B": "每个词元的{stat}：A 与 B",
    "real feed-forward inputs of {name}": "{name} 的真实前馈输入",
    # Attention
    "Head {head} does not exist: model A has heads 0 to {last} (or 'mean').":
        "第 {head} 个头不存在：模型 A 的头编号为 0 到 {last}（或 'mean'）。",
    "mean over heads": "各头的平均",
    "Attention in layer {layer}, {head}: A, B and A − B":
        "第 {layer} 层的注意力，{head}：A、B 以及 A − B",
    "A − B (difference)": "A − B（差异）",
    "no layer {layer} (layers 0 to {last})": "没有第 {layer} 层（层编号 0 到 {last}）",
    "layer {layer} was not kept": "第 {layer} 层未保留",
    "no head {head} (heads 0 to {last})": "没有第 {head} 个头（头编号 0 到 {last}）",
    "{name} has {why}: not compared": "{name}{why}：不作比较",
    "no difference map: A and B do not both have this head":
        "没有差异图：A 与 B 并非都有这个头",
    "A − B is zero everywhere (the two attend alike)": "A − B 处处为零（两者的注意力相同）",
    "largest |A − B| {largest:.3g} (red: A attends more, blue: B does)":
        "最大 |A − B| 为 {largest:.3g}（红：A 关注更多，蓝：B 关注更多）",
    "query %{y}<br>key %{x}<br>A − B %{z:.3f}": "查询 %{y}<br>键 %{x}<br>A − B %{z:.3f}",
    "Every head of layer {layer}: A and B": "第 {layer} 层的每个头：A 与 B",
    "Neither model has attention for layer {layer}.": "两个模型都没有第 {layer} 层的注意力。",
    "{name}: no layer {layer}": "{name}：没有第 {layer} 层",
    "top: {a}; below: {b}": "上：{a}；下：{b}",
    "Attention entropy per head (bits): A and B": "每个头的注意力熵（比特）：A 与 B",
    "left: {a} · right: {b}": "左：{a} · 右：{b}",
    "A − B is zero for every head": "每个头的 A − B 都为零",
    "largest |A − B| {largest:.3g} bits": "最大 |A − B| 为 {largest:.3g} 比特",
    "A has {la} layers × {ha} heads, B {lb} × {hb}: compared side by side only":
        "A 有 {la} 层 × {ha} 个头，B 有 {lb} × {hb}：只并排比较",
    # Logit lens
    "Logit lens: A and B": "logit 透镜：A 与 B",
    "The logit lens was not read at the same positions for both models.":
        "两个模型的 logit 透镜不是在相同位置读取的。",
    "the final predictions (last layer) agree at {k} of {n} positions":
        "最终预测（最后一层）在 {n} 个位置中有 {k} 个一致",
    # Generate, in lockstep
    "A: token": "A：词元",
    "A: probability": "A：概率",
    "B: token": "B：词元",
    "B: probability": "B：概率",
    "part": "分歧",
    "Steps of A and B (newest first)": "A 与 B 的各步（最新在前）",
    "Next-token candidates of A and B": "A 与 B 的下一个词元候选",
    "(a full bar is 100 %; orange: the token chosen; marked: where the two part)":
        "（满条为 100 %；橙色：选中的词元；高亮：两者分歧之处）",
    "stopped at <|endoftext|>": "已在 <|endoftext|> 处停止",
    "A and B agree on every token so far": "到目前为止 A 与 B 的每个词元都一致",
    "A and B part at step {step} (marked: the tokens where they differ)":
        "A 与 B 在第 {step} 步分歧（高亮：两者不同的词元）",
    "{n} steps of A and B · <b>{rate:.1f} steps/s</b> (a step: one token of each) · {path}":
        "A 与 B 共 {n} 步 · <b>每秒 {rate:.1f} 步</b>（每步：各生成一个词元） · {path}",
    " · {name}'s window is full: it recomputes its last context_length tokens":
        " · {name} 的窗口已满：它会重新计算最后 context_length 个词元",
    " · context: A {a:,} tokens, B {b:,}": " · 上下文：A {a:,} 个词元，B {b:,} 个",
    " · vocabularies of {a:,} and {b:,} entries: the bars compare token texts":
        " · 词表分别有 {a:,} 和 {b:,} 个条目：条形图比较的是词元文本",
}
