"""Write the word-frequency lists the string-metric tests and benchmarks use (run once).

    pip install wordfreq==3.1.1   # in a throwaway virtualenv: not a project dependency
    python tests/data/make_word_lists.py

For each language, the :data:`TOP` most frequent words of wordfreq's "best" list (Robyn
Speer's wordfreq 3.1.1, data from Wikipedia, subtitles, news, books, web text, Twitter and
Reddit; CC BY-SA 4.0) with their frequency among all words of the language, one
``word<TAB>frequency`` a line, most frequent first, into ``words_<lang>.tsv`` beside this
script. The lists are read as they are: wordfreq's own tokenizers (MeCab, jieba) are not
needed to read them.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import wordfreq

LANGUAGES = ("en", "de", "fr", "ja", "zh")
TOP = 3000
"""Words per language: the heads a string metric finds at n ≤ 10⁷ are in the top few
hundred; the rest is tail that collides with them in the sketch."""


def main() -> None:
    here = Path(__file__).parent
    for lang in LANGUAGES:
        freqs = wordfreq.get_frequency_dict(lang, wordlist="best")
        top = sorted(freqs.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
        head = f"# wordfreq {version('wordfreq')}: top {TOP} of '{lang}' (best)"
        lines = [head + ", word<TAB>frequency"]
        lines += [f"{w}\t{f:.4g}" for w, f in top if "\t" not in w and "\n" not in w]
        (here / f"words_{lang}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(lang, len(top), f"mass {sum(f for _, f in top):.3f}")


if __name__ == "__main__":
    main()
