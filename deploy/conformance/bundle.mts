/**
 * Writes an unsigned OpenWOP certification bundle v3 from one lane of the public
 * conformance suite: the vitest JSON report, the RFC 0148 ledger and the host's
 * discovery document. It derives the rows with the suite's own helpers
 * (requirement-ledger.ts, scenario-disposition.ts, profiles.ts), as the suite's CLI
 * does; `wop certify sign` then adds the totals, the witness digest and the signature.
 *
 * usage: npx tsx bundle.mts <report.json> <ledger.jsonl> <major 1|2> <out.json>
 * env:   SUITE_DIR (the suite's conformance folder), OPENWOP_BASE_URL, SPEC_DIR (the v2
 *        spec folder holding profiles.json), HOST_VERSION, HOST_BUILD (a commit),
 *        OPENWOP_HOST_RELAXATIONS (the JSON array of the host's declared relaxations)
 *
 * Profiles: at major 1 the suite's discovery predicates (deriveProfiles,
 * isCoreStandard) with the floors floorFilesFor selects for the document; at major 2
 * the predicates of spec/v2/profiles.json (every family present as a record, every
 * metadata key present). A claimed profile is certified when every one of its floor
 * rows is a witnessed executed pass (a discovery-only floor has none) and no row of the
 * bundle is blocked, and no declared relaxation touches it (RFC 0173 §A.2): a relaxed
 * `<family>.*` obligation denies the profiles built on that family (at major 2 the
 * families of the predicate, at major 1 those whose floor has a scenario of it).
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [reportPath, ledgerPath, majorArg, outPath] = process.argv.slice(2);
const suite = process.env.SUITE_DIR ?? '';
const base = (process.env.OPENWOP_BASE_URL ?? '').replace(/\/$/, '');
const major = Number(majorArg);
if (!reportPath || !ledgerPath || !outPath || (major !== 1 && major !== 2) || !suite || !base) {
  console.error('usage: SUITE_DIR=… OPENWOP_BASE_URL=… npx tsx bundle.mts <report.json> <ledger.jsonl> <1|2> <out.json>');
  process.exit(2);
}
const lib = (f: string) => import(pathToFileURL(join(suite, 'src/lib', f)).href);
const { readLedgerFile } = await lib('requirement-ledger.ts');
const { deriveRequirementDispositions } = await lib('scenario-disposition.ts');
const { deriveProfiles, isCoreStandard, DEPRECATED_PROFILE_ALIASES, PROFILE_FLOOR_SCENARIOS } = await lib('profiles.ts');
const { floorFilesFor } = await lib('requirement-registry.ts');

function canonicalJSON(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJSON).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const o = value as Record<string, unknown>;
    return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonicalJSON(o[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const discoveryURL = `${base}/.well-known/openwop`;
const resp = await fetch(discoveryURL, { headers: { Accept: 'application/json', 'OpenWOP-Version': `${major}.0` } });
const doc = (await resp.json()) as Record<string, unknown>;

// The lane's per-file states, as the suite's CLI reads its report.
type State = 'passed' | 'failed' | 'skipped';
const report = JSON.parse(readFileSync(reportPath, 'utf8')) as { testResults?: Array<{ name?: string; assertionResults?: Array<{ status?: string }> }> };
const states = new Map<string, State>();
for (const f of report.testResults ?? []) {
  if (typeof f.name !== 'string') continue;
  let pass = 0, fail = 0;
  for (const a of f.assertionResults ?? []) { if (a.status === 'passed') pass++; else if (a.status === 'failed') fail++; }
  states.set(f.name.split('/').pop()!, fail > 0 ? 'failed' : pass > 0 ? 'passed' : 'skipped');
}

// The claimed profiles and each one's floor scenario files.
const floors = new Map<string, string[]>();
const owners = new Map<string, string[]>(); // profile -> the families it is built on (major 2)
const discoveryOnly = new Set<string>(); // major 1 profiles whose floor is the discovery predicate alone
if (major === 1) {
  const claimed: string[] = [...deriveProfiles(doc)].filter((p: string) => !(p in DEPRECATED_PROFILE_ALIASES));
  if (isCoreStandard(doc)) claimed.push('openwop-core-standard');
  for (const p of claimed) {
    // floorFilesFor adds the branches of a discovery-conditional floor (replay-fork's)
    // that this document selects; a discovery-only floor (discovery-core, fixtures)
    // has no rows and certifies on its predicate.
    const f = PROFILE_FLOOR_SCENARIOS[p] as { requiredAnyPrefix?: string[]; discoveryOnly?: boolean } | undefined;
    if (f?.discoveryOnly === true) discoveryOnly.add(p);
    const files: string[] = [...(floorFilesFor(p, doc) ?? [])];
    floors.set(p, [...files.map((s) => s.replace(/\.test\.ts$/, '')), ...(f?.requiredAnyPrefix ?? [])]);
  }
} else {
  const spec = JSON.parse(readFileSync(join(process.env.SPEC_DIR ?? '', 'profiles.json'), 'utf8')) as {
    profiles: Array<{ id: string; predicate: { families?: string[]; metadata?: string[] }; floorScenarios: string[] }>;
  };
  for (const p of spec.profiles) {
    const holds = (p.predicate.families ?? []).every((k) => typeof doc[k] === 'object' && doc[k] !== null) &&
      (p.predicate.metadata ?? []).every((k) => k in doc);
    if (holds) { floors.set(p.id, p.floorScenarios); owners.set(p.id, p.predicate.families ?? []); }
  }
}
const ledger = readLedgerFile(ledgerPath);
const derived = deriveRequirementDispositions(states, ledger, [...floors.keys()], doc);

// A profile the runtime floor decides (runtimeDerived) and the run did not hold is not
// the host's: it is left out, as the suite's CLI leaves it out.
const verdicts = new Map<string, { certifiable: boolean; runtimeDerived: boolean; held: boolean }>(
  derived.verdicts.map((v: { profile: string; certifiable: boolean; runtimeDerived: boolean; held: boolean }) => [v.profile, v]));
for (const [p] of floors) {
  const v = verdicts.get(p);
  if (v?.runtimeDerived && !v.held) floors.delete(p);
}
// The suite's derivation mints one row per `requiredAnyPrefix` of its v1 floors
// (`openwop.floor.any.interrupt-`) whatever the lane. At major 2 the floors are
// spec/v2/profiles.json's, which name files and no prefix, and no file of such a
// prefix is a major-2 file (scenario-majors.json), so the row would be a v1 floor
// obligation no v2 run can meet: it is left out of a major-2 bundle.
const derivedRows = (derived.requirements as Array<{ requirementId: string; scenarioId: string; disposition: string; detail?: string; assertionCount?: number }>)
  .filter((r) => major === 1 || !r.scenarioId.endsWith('*'));
const rows = derivedRows.map((r: { requirementId: string; scenarioId: string; disposition: string; detail?: string; assertionCount?: number }) => ({
  id: r.requirementId,
  scenario: r.scenarioId,
  result: r.disposition,
  ...(r.assertionCount === undefined ? {} : { assertions: r.assertionCount }),
  ...(r.detail === undefined ? {} : { detail: r.detail }),
}));
const blocked = rows.filter((r: { result: string }) => r.result === 'blocked').length;
const stem = (s: string) => s.replace(/\*$/, '').replace(/\.test\.ts$/, '');
const relaxations = JSON.parse(process.env.OPENWOP_HOST_RELAXATIONS || '[]') as Array<{ obligation: string; durability: string; reason: string }>;
const relaxedFamilies = [...new Set(relaxations.map((r) => r.obligation.split('.')[0]!))];
const relaxedProfile = (id: string, scenarios: string[]) => relaxedFamilies.some((f) => major === 2
  ? (owners.get(id) ?? []).includes(f)
  : scenarios.some((s) => s.includes(f.replace(/s$/, ''))));
const claimedProfiles = [...floors.entries()].map(([id, scenarios]) => {
  // The file-level (and prefix) rows: per-`it` rows carry their file as scenario too.
  const floorRows = rows.filter((r: { id: string; scenario: string }) => !r.id.startsWith('openwop.it.') && scenarios.includes(stem(r.scenario)));
  const witnessed = floorRows.filter((r: { result: string; assertions?: number }) => r.result === 'executed-pass' && (r.assertions ?? 0) > 0);
  const suiteSays = major === 1 ? verdicts.get(id)?.certifiable !== false : true;
  return { id, evidenceTier: 'self', witnessCount: witnessed.length, certified: suiteSays && (scenarios.length > 0 ? witnessed.length === scenarios.length : discoveryOnly.has(id)) && blocked === 0 && !relaxedProfile(id, scenarios) };
});

const pkg = JSON.parse(readFileSync(join(suite, 'package.json'), 'utf8')) as { version: string };
const bundle = {
  bundleVersion: '3',
  generatedAt: new Date().toISOString(),
  suite: { name: '@openwop/openwop-conformance', version: pkg.version, targetMajor: major, specArtifactsVersion: 'reconstructed' },
  host: {
    name: 'wop', version: process.env.HOST_VERSION ?? 'dev',
    build: { kind: 'commit', id: process.env.HOST_BUILD ?? 'unknown' },
    signingKeyId: process.env.WOP_SIGNING_KEY_ID ?? 'wop-bundle-1',
    ...(relaxations.length > 0 ? { relaxations } : {}),
  },
  discovery: {
    url: discoveryURL,
    sha256: createHash('sha256').update(canonicalJSON(doc), 'utf8').digest('hex'),
    protocolVersions: doc.protocolVersions ?? ['1.0'], preferredVersion: doc.preferredVersion ?? '1.0', document: doc,
  },
  claimedProfiles,
  results: { requirements: rows },
};
writeFileSync(outPath, JSON.stringify(bundle, null, 2) + '\n');
// A blocked floor row of a claimed profile denies its certification (RFC 0148 §A): the
// run is refused, as the suite's CLI refuses an unclassified floor row.
const blockedFloor = [...floors.entries()].flatMap(([id, scenarios]) => rows
  .filter((r: { id: string; scenario: string; result: string }) => !r.id.startsWith('openwop.it.') && scenarios.includes(stem(r.scenario)) && r.result === 'blocked')
  .map((r: { id: string; detail?: string }) => `${id}: ${r.id} blocked (${r.detail ?? 'no reason'})`));
for (const b of blockedFloor) console.log(`major ${major} floor row blocked: ${b}`);
for (const p of claimedProfiles) console.log(`major ${major} ${p.id}: ${p.certified ? 'certified' : 'not certified'} (${p.witnessCount} floor rows witnessed of ${floors.get(p.id)!.length}${relaxedProfile(p.id, floors.get(p.id)!) ? `; relaxed: ${relaxations.map((r) => r.obligation).join(', ')}` : ''})`);
console.log(`major ${major}: ${rows.length} rows, ${blocked} blocked`);
if (blockedFloor.length > 0) process.exit(3);
