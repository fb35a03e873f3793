"""简体中文 for the page's share views (see zh_ui.py for the conventions): the shareable link
(``share``, ``share_view``) and the guided walk of the diagram (``book.stages``,
``probes.stages``, ``tabs.walk``, ``plots.walk``)."""

ZH_SHARE: dict[str, str] = {
    # ----- the link: the button, its box and note -------------------------------------------
    "Copy link": "复制链接",
    "link to this page": "本页链接",
    "This link opens the page with this model, prompt and tab; the page copied it to the "
    "clipboard (or copy it from the box).":
        "此链接会以相同的模型、提示词和标签页打开本页；页面已将它复制到剪贴板（也可从框中复制）。",
    "A link cannot carry a checkpoint file: it opens this config with random weights (seed "
    "{seed}).": "链接无法携带检查点文件：它会以此配置和随机权重（随机种子 {seed}）打开。",
    "A link cannot carry the weights trained in the Train tab: it opens the Build tab's config "
    "and weights.": "链接无法携带在“训练”标签页中训练出的权重：它会以“构建”标签页的配置和权重打开。",
    "The prompt has {n:,} characters; a link carries at most {most:,}, so it opens with the "
    "default prompt.": "提示词有 {n:,} 个字符；链接最多携带 {most:,} 个，因此会以默认提示词打开。",
    "**This link could not be used in full:**": "**此链接未能完全使用：**",

    # ----- the link: what a link opened could not use (share.read_query) ---------------------
    "The link could not be read (it is not text): the page opens with its defaults.":
        "无法读取此链接（它不是文本）：页面以默认设置打开。",
    "This link is {n:,} characters long; a GPT Explorer link has at most {most:,}. It was "
    "ignored: the page opens with its defaults.":
        "此链接长 {n:,} 个字符；GPT Explorer 的链接最多 {most:,} 个字符。已忽略它：页面以默认设置打开。",
    "This link has {n:,} parameters; a GPT Explorer link has at most {most}. It was ignored: "
    "the page opens with its defaults.":
        "此链接有 {n:,} 个参数；GPT Explorer 的链接最多 {most} 个。已忽略它：页面以默认设置打开。",
    "Part {n} of the link is not valid UTF-8 text; it was ignored.":
        "链接的第 {n} 部分不是有效的 UTF-8 文本；已忽略。",
    "The link has parameters this page does not know: {names}. They were ignored.":
        "链接中有本页不认识的参数：{names}。已忽略它们。",
    "{name} appears {n} times in the link, so the page cannot tell which one is meant: it uses "
    "its default.": "{name} 在链接中出现了 {n} 次，页面无法判断应使用哪一个：改用默认值。",
    "{name} must be one of {options} (got {value}); the page uses {default}.":
        "{name} 必须是 {options} 之一（收到 {value}）；页面改用 {default}。",
    "A link cannot load weights from a file (a path on the server or an upload): the page uses "
    "random weights.": "链接不能从文件（服务器上的路径或上传的文件）加载权重：页面改用随机权重。",
    "seed must be a whole number from 0 to 2**63 - 1 (got {value}); the page uses {default}.":
        "seed 必须是 0 到 2**63 - 1 之间的整数（收到 {value}）；页面改用 {default}。",
    "The link's prompt has {n:,} characters; a link carries at most {most:,}. The page uses "
    "its default prompt.": "链接中的提示词有 {n:,} 个字符；链接最多携带 {most:,} 个。页面改用默认提示词。",
    "The link's prompt is empty: the page uses its default prompt.":
        "链接中的提示词为空：页面改用默认提示词。",
    "{name} in the link must be {what} (got {value}); the page uses the preset's {default}.":
        "链接中的 {name} 必须是{what}（收到 {value}）；页面改用预设的 {default}。",
    "The link's config is refused: {message} The page uses the preset {preset} as it is.":
        "链接中的配置被拒绝：{message} 页面改用未经修改的预设 {preset}。",
    "a whole number of at most 12 digits": "不超过 12 位的整数",
    "a decimal number": "十进制数",
    "true or false": "true 或 false",
    "a name in lower-case letters": "由小写字母组成的名称",
    "tab": "标签页",

    # ----- the walk: the stages of the diagram (book.stages) ---------------------------------
    "Token and positional embeddings": "词元嵌入与位置嵌入",
    "norm1 (LayerNorm before attention)": "norm1（注意力之前的层归一化）",
    "Shortcut around attention": "注意力外的快捷连接",
    "norm2 (LayerNorm before the feed-forward network)": "norm2（前馈网络之前的层归一化）",
    "Feed-forward network": "前馈网络",
    "Shortcut around the feed-forward network": "前馈网络外的快捷连接",
    "Output head (logits)": "输出头（logits）",
    "norm1 (LayerNorm after the attention's shortcut)": "norm1（注意力快捷连接之后的层归一化）",
    "norm2 (LayerNorm after the feed-forward's shortcut)": "norm2（前馈网络快捷连接之后的层归一化）",
    # ----- the walk: the diagram's buttons and the stage card (plots.walk, tabs.walk) --------
    "stage": "阶段",
    "Click a stage of the diagram: its shape and statistics for the Inside tab's prompt.":
        "点击图中的某个阶段：查看它在“前向传播内部”标签页提示词下的形状和统计量。",
    "{title} (section {section}): click for its shape and statistics":
        "{title}（第 {section} 节）：点击查看其形状和统计量",
    "book §{section}, in the transformer block of §{block}": "书中第 {section} 节，位于第 {block} 节的 Transformer 块中",
    "book §{section}": "书中第 {section} 节",
    "block {block} of {n} (trf_blocks[{block}])": "第 {block} 块，共 {n} 块（trf_blocks[{block}]）",
    "shape: (batch, tokens, channels)": "形状：（批次, 词元, 通道）",
    "probe point": "探测点",
    "shape": "形状",
    "std": "标准差",
    "min": "最小值",
    "max": "最大值",
    "Some values are inf or NaN: they overflowed.": "部分值为 inf 或 NaN：数值溢出了。",
    "logits, shape (batch, tokens, vocabulary): <b>{shape}</b>":
        "logits，形状（批次, 词元, 词表）：<b>{shape}</b>",
    "One score per vocabulary entry at every position. The most likely next token after the "
    "last one: <b>{token}</b> ({p:.2%}).":
        "每个位置上词表中每个条目各有一个分数。最后一个词元之后最可能的下一个词元：<b>{token}</b>（{p:.2%}）。",
    "for the prompt “{prompt}” ({n} tokens)": "提示词“{prompt}”（{n} 个词元）",
    # where each probe point is measured (book.probe_points), in a row's tooltip
    "TransformerBlock.forward: the block's input x": "TransformerBlock.forward：块的输入 x",
    "the input of norm1. Pre-LN (book): = resid_pre. Post-LN: the sum resid_pre + attention "
    "output": "norm1 的输入。Pre-LN（书中）：= resid_pre。Post-LN：resid_pre 与注意力输出之和",
    "the output of norm1, after scale and shift": "norm1 的输出，经过 scale 和 shift 之后",
    "the output of multi-head attention (after out_proj, before dropout and the shortcut)":
        "多头注意力的输出（out_proj 之后，dropout 和快捷连接之前）",
    "the residual stream after the attention sub-block (pre-LN: = ln2_in)":
        "注意力子块之后的残差流（pre-LN：= ln2_in）",
    "the input of norm2": "norm2 的输入",
    "the output of norm2, after scale and shift": "norm2 的输出，经过 scale 和 shift 之后",
    "FeedForward: the first Linear's output": "FeedForward：第一个 Linear 的输出",
    "FeedForward: the same hidden layer after GELU (or ReLU/SiLU)":
        "FeedForward：同一隐藏层经过 GELU（或 ReLU/SiLU）之后",
    "FeedForward: the second Linear's output": "FeedForward：第二个 Linear 的输出",
    "TransformerBlock.forward: the block's output": "TransformerBlock.forward：块的输出",
    "GPTModel.forward: the input of final_norm (= the last block's output)":
        "GPTModel.forward：final_norm 的输入（= 最后一个块的输出）",
    "GPTModel.forward: the output of final_norm, which out_head turns into logits":
        "GPTModel.forward：final_norm 的输出，out_head 把它变成 logits",
    # --- a link over the memory budget -------------------------------------------------
    "The link's preset {preset} is refused: {message} The page uses {default}.":
        "链接中的预设 {preset} 被拒绝：{message} 页面改用 {default}。",
    "The link's pretrained GPT-2 {size} is refused: {message} The page uses random "
        "weights.":
        "链接中的预训练 GPT-2 {size} 被拒绝：{message} 页面改用随机权重。",
}
