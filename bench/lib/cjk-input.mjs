// The input of the CJK latency benches (bench/grounding-cjk-ab.mjs, bench/grounding-cjk-floor.mjs): 100 KB of Chinese or
// Japanese sources and a 4 KB answer copied from them with some places and figures changed (issue #34's budget).

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * `{ sources: [100 KB of text], answer: 4 KB }` in Chinese (`zh`) or Japanese (`ja`), the same every call; or, with
 * `zh-ts` or `ja-ts`, real prose: TypeScript's own messages as translated for its compiler (see `translatedMessages`).
 */
export function cjkInput(lang) {
  if (lang === 'zh-ts' || lang === 'ja-ts') return translatedMessages(lang);
  // Sentences drawn from parts, so that 100 KB holds few repeats (a seeded generator: the same text each run).
  // The product is taken in 32 bits (Math.imul): in doubles it passes 2^53 and loses its low bits, and the low bits of
  // such a generator repeat within a few draws, so every draw is its high bits.
  let seed = 20261130;
  const draw = (n) => {
    seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff;
    return (seed >>> 15) % n;
  };
  const pick = (xs) => xs[draw(xs.length)];
  const ZH = {
    who: ['华为公司', '阿里巴巴', '腾讯', '比亚迪', '小米集团', '中国银行', '清华大学', '北京大学', '国家电网', '中国移动', '京东', '百度', '字节跳动', '宁德时代', '联想集团', '中石油'],
    where: ['上海', '北京', '广州', '深圳', '杭州', '南京', '成都', '武汉', '西安', '重庆', '天津', '苏州', '长沙', '郑州', '青岛', '厦门'],
    what: ['新的研发中心', '一座大型工厂', '区域总部', '数据中心', '物流园区', '培训学院', '实验室', '销售办事处', '创新基地', '客服中心'],
    verb: ['开设了', '建成了', '宣布投资', '启动了', '扩建了', '关闭了', '收购了', '计划建设'],
    field: ['人工智能', '自动驾驶', '新能源汽车', '半导体', '云计算', '生物医药', '电子商务', '智能制造', '金融科技', '量子通信', '机器人', '医疗器械'],
    extra: ['该项目得到了地方政府的大力支持', '专家认为这将推动当地经济发展', '公司表示将继续加大研发投入', '该地区的就业人数因此明显增加', '项目预计在三年内收回成本', '消费者对此反应积极', '分析人士对前景持谨慎态度', '该举措引起了同行的广泛关注'],
    sentence(p) {
      return pick([
        () => `${p.y}年${p.m}月，${p.who}在${p.where}${pick(this.verb)}${pick(this.what)}，员工约有${p.n}人。`,
        () => `${p.who}的${pick(this.what)}位于${p.where}，主要研究${pick(this.field)}和${pick(this.field)}技术。`,
        () => `据报道，${p.who}${p.y}年的营业收入达到${p.n}亿元，同比增长${p.m}%。`,
        () => `${pick(this.extra)}，${p.who}在${p.where}的业务规模已超过${p.n}万人次。`,
        () => `会议将于${p.y}年${p.m}月在${p.where}举行，预计有${p.n}名代表参加，议题包括${pick(this.field)}。`,
        () => `${pick(this.extra)}。`,
      ])();
    },
  };
  const JA = {
    who: ['トヨタ', 'ホンダ', 'ソニー', 'パナソニック', '日立製作所', '任天堂', '三菱商事', '楽天', 'ソフトバンク', '東芝', 'キヤノン', 'ファナック', '日産', 'セブンイレブン', '富士通', '京セラ'],
    where: ['東京', '大阪', '京都', '福岡', '札幌', '名古屋', '横浜', '神戸', '仙台', '広島', '金沢', '那覇', '新潟', '熊本', '静岡', '岡山'],
    what: ['新しい工場', '研究所', '物流センター', '本社ビル', 'データセンター', '研修施設', '販売拠点', '開発拠点', '店舗', '倉庫'],
    verb: ['を開設しました', 'を建設しました', 'を拡張しました', 'を閉鎖しました', 'を買収しました', 'の建設を発表しました'],
    field: ['人工知能', '自動運転', '電気自動車', '半導体', 'クラウド', '医薬品', '電子商取引', 'ロボット', '金融', '再生可能エネルギー', '医療機器', '通信'],
    extra: ['この計画は地元自治体から強い支持を受けています', '専門家はこれが地域経済を活性化させると見ています', '同社は今後も研究開発への投資を続ける方針です', 'この地域の雇用は大きく増えました', '投資は三年以内に回収される見込みです', '消費者の反応はおおむね好意的でした', 'アナリストは慎重な見方を示しています'],
    sentence(p) {
      return pick([
        () => `${p.who}は${p.y}年${p.m}月に${p.where}で${pick(this.what)}${pick(this.verb)}。従業員は約${p.n}人です。`,
        () => `${p.who}の${pick(this.what)}は${p.where}にあり、主に${pick(this.field)}と${pick(this.field)}の研究を行っています。`,
        () => `報道によると、${p.who}の${p.y}年の売上高は${p.n}億円で、前年比${p.m}%増加しました。`,
        () => `${pick(this.extra)}。${p.who}の${p.where}での事業は${p.n}万人以上が利用しています。`,
        () => `次の会議は${p.y}年${p.m}月に${p.where}で開催される予定で、約${p.n}人の代表が参加し、${pick(this.field)}について議論します。`,
        () => `${pick(this.extra)}。`,
      ])();
    },
  };
  const L = lang === 'ja' ? JA : ZH;
  const parts = () => ({ who: pick(L.who), where: pick(L.where), y: 2000 + draw(25), m: 1 + draw(12), n: 100 + draw(9000) });
  const sentences = [];
  let sources = '';
  while (sources.length < 100_000) {
    const s = L.sentence(parts());
    sentences.push(s);
    sources += s + (sentences.length % 5 === 0 ? '\n' : '');
  }
  sources = sources.slice(0, 100_000);
  // The answer: source sentences copied, every third with its place or its first figure changed.
  let answer = '';
  for (let i = 0; answer.length < 4_000; i++) {
    let s = sentences[(i * 37) % sentences.length];
    if (i % 3 === 1) for (const w of L.where) if (s.includes(w)) { s = s.replace(w, L.where[(L.where.indexOf(w) + 5) % L.where.length]); break; }
    if (i % 3 === 2) s = s.replace(/\d+/, (d) => String(Number(d) + 7));
    answer += s;
  }
  return { sources: [sources], answer: answer.slice(0, 4_000) };
}

/**
 * Text written by people rather than drawn from parts: the TypeScript compiler's diagnostic messages as its
 * translators wrote them (`typescript/lib/<locale>/diagnosticMessages.generated.json`, a dev dependency), one a line.
 * Chinese is the simplified then the traditional translation, cut at 100 KB; Japanese is its one translation, 95 KB.
 * Their runs of Han and kana repeat as a manual's do: 20 % of the Chinese runs' characters and 34 % of the Japanese
 * are in a run written before, against 74 % and 81 % in the drawn input. The answer copies every fifth message up
 * to 4 KB, every third of those with a clause no message has after it.
 */
function translatedMessages(lang) {
  const lib = dirname(createRequire(import.meta.url).resolve('typescript'));
  const read = (locale) => Object.values(JSON.parse(readFileSync(join(lib, locale, 'diagnosticMessages.generated.json'), 'utf8')));
  const messages = lang === 'ja-ts' ? read('ja') : [...read('zh-cn'), ...read('zh-tw')];
  const sources = messages.join('\n').slice(0, 100_000);
  const tail = lang === 'ja-ts' ? 'ただし設定ファイルは不要です。' : '但是不需要任何配置文件。';
  let answer = '';
  for (let i = 0; answer.length < 4_000; i += 5) answer += messages[i] + (i % 15 === 10 ? tail : '') + '\n';
  return { sources: [sources], answer: answer.slice(0, 4_000) };
}
