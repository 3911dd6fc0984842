import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkGrounding, DEFAULT_GROUNDING_THRESHOLD } from './index.js';

// A dropped or added negation is flagged like a changed number: a claim whose only passages holding its words
// disagree with it on negation gets no support from them, in English, German, French, Spanish, Chinese and Japanese.

const SEED = Number(process.env.GROUNDING_PROPS_SEED ?? 20261129);
const RUNS = Number(process.env.GROUNDING_PROPS_RUNS ?? 1);
const runs = (numRuns: number) => ({ seed: SEED, numRuns: Math.max(1, Math.round(numRuns * RUNS)) });

/** A negated sentence and the same sentence stated plainly. */
const PAIRS: readonly [negated: string, plain: string][] = [
  ['Customers on the legacy plan are not affected by the change.', 'Customers on the legacy plan are affected by the change.'],
  ['The museum is never open on public holidays.', 'The museum is open on public holidays.'],
  ['The update does not require a restart of the gateway.', 'The update does require a restart of the gateway.'],
  ['Kunden im alten Tarif sind von der Änderung nicht betroffen.', 'Kunden im alten Tarif sind von der Änderung betroffen.'],
  ['Die Kunden haben keinen Zugang zum Kundenportal.', 'Die Kunden haben Zugang zum Kundenportal.'],
  ['Das Museum öffnet an Feiertagen niemals seine Türen.', 'Das Museum öffnet an Feiertagen seine Türen.'],
  ['Les clients du forfait historique ne sont pas concernés par le changement.', 'Les clients du forfait historique sont concernés par le changement.'],
  ['Le musée ne ferme jamais ses portes le lundi.', 'Le musée ferme ses portes le lundi.'],
  ['Los clientes del plan antiguo no se ven afectados por el cambio.', 'Los clientes del plan antiguo se ven afectados por el cambio.'],
  ['El museo nunca abre sus puertas los lunes.', 'El museo abre sus puertas los lunes.'],
  ['Ningún cliente del plan antiguo pierde sus datos.', 'Cliente del plan antiguo pierde sus datos.'],
  // German "nicht" at a clause's end negates the verb before it; in a subordinate clause, the participle after it.
  ['Das Museum öffnet am Montag nicht.', 'Das Museum öffnet am Montag.'],
  ['Der Vorstand kennt den neuen Lieferanten nicht.', 'Der Vorstand kennt den neuen Lieferanten.'],
  ['Er konnte nicht mitreden, weil er den Bericht nicht gelesen hat.', 'Er konnte nicht mitreden, weil er den Bericht gelesen hat.'],
  // Chinese negations before the verb, also glued to it ("没读"); Japanese endings after it.
  ['这家博物馆周一不开放。', '这家博物馆周一开放。'],
  ['他没有读过这份报告。', '他读过这份报告。'],
  ['他没读过这份报告。', '他读过这份报告。'],
  ['该药物非处方药。', '该药物是处方药。'],
  ['会议未取消。', '会议已取消。'],
  ['他从未去过北京。', '他去过北京。'],
  ['他不再在这家公司工作。', '他在这家公司工作。'],
  ['この店は月曜日に営業しません。', 'この店は月曜日に営業します。'],
  ['この薬は処方箋が必要ない。', 'この薬は処方箋が必要です。'],
  ['彼は会議に来なかった。', '彼は会議に来た。'],
  ['その店は月曜日に営業せず、火曜日に開きます。', 'その店は月曜日に営業し、火曜日に開きます。'],
  // Portuguese, Italian, Russian, Ukrainian, Hindi and Arabic negations before the verb.
  ['O museu não abre às segundas-feiras.', 'O museu abre às segundas-feiras.'],
  ['Il museo non apre il lunedì mattina.', 'Il museo apre il lunedì mattina.'],
  ['Музей не работает по понедельникам.', 'Музей работает по понедельникам.'],
  ['Він ніколи не був у Києві.', 'Він був у Києві.'],
  ['संग्रहालय सोमवार को नहीं खुलता है।', 'संग्रहालय सोमवार को खुलता है।'],
  ['المتحف لا يفتح يوم الاثنين.', 'المتحف يفتح يوم الاثنين.'],
  // Korean: "안" and "못" before the verb; "않다", "없다", "아니다", "못하다" after it, in any of their endings.
  ['박물관은 월요일에 문을 열지 않습니다.', '박물관은 월요일에 문을 엽니다.'],
  ['박물관은 월요일에 문을 안 엽니다.', '박물관은 월요일에 문을 엽니다.'],
  ['이 약은 심각한 부작용이 없다.', '이 약은 심각한 부작용이 있다.'],
  ['그는 어제 회의에 못 참석했다.', '그는 어제 회의에 참석했다.'],
  ['그는 어제 회의에 참석하지 못했다.', '그는 어제 회의에 참석했다.'],
  ['이 제품은 방수 제품이 아닙니다.', '이 제품은 방수 제품입니다.'],
];

/** Sentences on other topics, with and without negations, in the same languages. */
const OTHERS = [
  'The Eiffel Tower was completed in March 1889 and stands 330 metres tall in Paris.',
  'The airline will not resume flights to Cairo until September, a spokesperson said.',
  'Unemployment fell to 5.2% in June, the lowest level since 2019.',
  'Der Zug nach Hamburg fährt jeden Morgen um sieben Uhr ab.',
  'Unsere Bibliothek verleiht keine Nachschlagewerke an Besucher.',
  'La bibliothèque prête des romans aux étudiants.',
  'Le train pour Lyon ne part pas avant huit heures.',
  'La biblioteca cierra al mediodía los sábados.',
  'El tren a Valencia no sale antes de las ocho.',
];

const grounded = (sources: string[], answer: string) => checkGrounding({ sources, answer }).grounded;

describe('a flipped negation is flagged', () => {
  const rows: { name: string; source: string; answer: string; grounded: boolean }[] = [];
  for (const [negated, plain] of PAIRS) {
    rows.push({ name: `copied: ${negated}`, source: negated, answer: negated, grounded: true });
    rows.push({ name: `copied: ${plain}`, source: plain, answer: plain, grounded: true });
    rows.push({ name: `negation dropped: ${plain}`, source: negated, answer: plain, grounded: false });
    rows.push({ name: `negation added: ${negated}`, source: plain, answer: negated, grounded: false });
  }
  // "No." as an abbreviation is no negation: a copy of a sentence with it stays grounded.
  const WORLD = 'Chris Evert is a former World No. 1 professional tennis player from the United States.';
  rows.push({ name: '"World No. 1" copied', source: WORLD, answer: WORLD, grounded: true });
  rows.push({ name: '"World No." cut off by a sentence split', source: WORLD, answer: 'Chris Evert is a former World No.', grounded: true });
  rows.push({ name: '"No. 19" before a glued sentence', source: `He reached World No. 19.Sarah Wade is a former tennis player from Great Britain.`, answer: '19.Sarah Wade is a former tennis player from Great Britain.', grounded: true });

  it.each(rows)('$name', ({ source, answer, grounded: expected }) => {
    const r = checkGrounding({ sources: [source], answer });
    expect(r.grounded).toBe(expected);
    if (!expected) expect(r.score).toBeLessThan(DEFAULT_GROUNDING_THRESHOLD);
  });

  it('a second source stating the claim plainly still supports it (adding a source never lowers the score)', () => {
    for (const [negated, plain] of PAIRS) {
      expect(grounded([negated, plain], plain)).toBe(true);
      expect(grounded([plain, negated], negated)).toBe(true);
    }
  });

  it('property: among other sources, dropping or adding a negation makes a copied sentence ungrounded; restoring it, grounded; adding the agreeing source never lowers it', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PAIRS),
        fc.boolean(),
        fc.subarray([...OTHERS], { maxLength: 4 }),
        fc.nat(),
        ([negated, plain], drop, others, at) => {
          const [source, flipped] = drop ? [negated, plain] : [plain, negated];
          const sources = [...others];
          sources.splice(at % (sources.length + 1), 0, source);
          const joined = [sources.join(' ')];
          for (const s of [sources, joined]) {
            expect(grounded(s, source)).toBe(true);
            const r = checkGrounding({ sources: s, answer: flipped });
            expect(r.score).toBeLessThan(DEFAULT_GROUNDING_THRESHOLD);
            const withAgreeing = checkGrounding({ sources: [...s, flipped], answer: flipped });
            expect(withAgreeing.score).toBeGreaterThanOrEqual(r.score);
            expect(withAgreeing.grounded).toBe(true);
          }
        },
      ),
      runs(200),
    );
  });
});
