import { FILTER_OPERATORS, FILTER_PARAMETER } from '../contracts/items.js';
import { ValidationError, type FieldProblem } from '../shared/errors.js';
import { parseQueryDecimal } from '../shared/pagination.js';
import { isIsoDate, isIsoTimestamp } from '../shared/time.js';
import type { ItemDoc, FilterOperator } from '../contracts/items.js';
import type { FieldDefinition, PipelineDoc } from '../contracts/pipelines.js';
import type { Filter } from 'mongodb';

/**
 * Item list search (DECISIONS.md section 12.3): `q` (name words by prefix) and custom-field filters
 * (`metadata.<field>[op]=value`), turned into conditions that an index serves on MongoDB 7.0+:
 * `name_words` {company_id, name_words} for `q`, and the compound wildcard index `custom_fields`
 * {company_id, pipeline_id, "custom.$**"} for the filters (filters need pipeline_id, its second key).
 * The planner picks between them and the list indexes; test/items/search-plan.test.ts shows the plans.
 */

const WORD = /[\p{L}\p{N}]+/gu;
const MAX_QUERY_WORDS = 10;

/** The lower-cased words of a name, stored in `name_words` (multikey index `name_words`). */
export function nameWords(name: string): string[] {
  return [...new Set(name.normalize('NFKC').toLowerCase().match(WORD) ?? [])];
}

const escapeRegex = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Every query word must start some word of the name. Each is an anchored, case-sensitive prefix
 * regex on the lower-cased words, which MongoDB turns into index bounds ([word, next string)).
 */
function nameCondition(q: string, problems: FieldProblem[]): Filter<ItemDoc> | undefined {
  const words = nameWords(q);
  // A query of no words (`---`, a space, a zero-width space) would match every item: refused, not ignored.
  if (words.length === 0) return void problems.push({ path: 'q', message: 'expected at least one letter or digit' });
  if (words.length > MAX_QUERY_WORDS)
    return void problems.push({ path: 'q', message: `at most ${MAX_QUERY_WORDS} words` });
  return { $and: words.map((word) => ({ name_words: { $regex: `^${escapeRegex(word)}` } })) };
}

const RANGE_OPERATORS = new Set<FilterOperator>(['gt', 'gte', 'lt', 'lte']);
const ORDERED_TYPES = new Set(['number', 'date', 'text', 'email', 'url']);

type Scalar = string | number | boolean;

/** One query value parsed by the field's type; undefined when it is not a value of that type. */
function parseValue(field: FieldDefinition, raw: string): Scalar | undefined {
  switch (field.type) {
    case 'number':
      return parseQueryDecimal(raw); // the grammar of limit: 0x10 or 1e3 is no number here
    case 'boolean':
      return raw === 'true' ? true : raw === 'false' ? false : undefined;
    case 'date':
      if (isIsoDate(raw)) return raw;
      return isIsoTimestamp(raw) ? new Date(raw).toISOString() : undefined;
    case 'select':
    case 'multi_select':
      return field.options?.includes(raw) ? raw : undefined;
    default:
      return raw;
  }
}

function expectedOf(field: FieldDefinition): string {
  switch (field.type) {
    case 'number':
      return 'expected a decimal number';
    case 'boolean':
      return 'expected true or false';
    case 'date':
      return 'expected an ISO 8601 date or timestamp';
    case 'select':
    case 'multi_select':
      return `expected one of the field's options (${(field.options ?? []).join(', ')})`;
    default:
      return 'expected a value';
  }
}

function parseFilter(
  pipeline: PipelineDoc,
  parameter: string,
  raw: unknown,
  problems: FieldProblem[],
): Filter<ItemDoc> | undefined {
  const problem = (message: string) => void problems.push({ path: parameter, message });
  const match = FILTER_PARAMETER.exec(parameter);
  if (!match) return problem('expected metadata.<field> or metadata.<field>[<operator>]');
  const [, name, rawOperator] = match;
  const operator = (rawOperator ?? 'eq') as FilterOperator;
  if (!FILTER_OPERATORS.includes(operator)) return problem(`unknown operator; one of ${FILTER_OPERATORS.join(', ')}`);
  const field = pipeline.fields.find((candidate) => candidate.name === name);
  if (!field) return problem('is not a custom field of this pipeline');
  if (typeof raw !== 'string') return problem('give each filter once');
  const path = `custom.${field.name}`;

  if (operator === 'exists') {
    if (raw !== 'true' && raw !== 'false') return problem('expected true or false');
    return { [path]: { $exists: raw === 'true' } };
  }
  if (RANGE_OPERATORS.has(operator) && !ORDERED_TYPES.has(field.type))
    return problem(`${operator} does not apply to a ${field.type} field`);
  const texts = operator === 'in' ? raw.split(',') : [raw];
  if (texts.length > 100) return problem('at most 100 values');
  const values: Scalar[] = [];
  for (const text of texts) {
    const value = parseValue(field, text);
    if (value === undefined) return problem(expectedOf(field));
    values.push(value);
  }
  const condition =
    operator === 'in' ? { $in: values } : operator === 'eq' ? values[0] : { [`$${operator}`]: values[0] };
  return { [path]: condition };
}

export interface ItemSearch {
  conditions: Filter<ItemDoc>[];
}

/**
 * The conditions of `q` and of the `metadata.*` parameters. Custom-field filters need `pipeline_id`
 * (they are judged against its fields); every problem names its query parameter.
 */
export function itemSearch(
  pipeline: PipelineDoc | undefined,
  q: string | undefined,
  filters: Record<string, unknown>,
): ItemSearch {
  const problems: FieldProblem[] = [];
  const parsed: Array<Filter<ItemDoc>> = [];
  for (const [parameter, raw] of Object.entries(filters)) {
    if (!pipeline) problems.push({ path: parameter, message: 'custom-field filters need pipeline_id' });
    else {
      const filter = parseFilter(pipeline, parameter, raw, problems);
      if (filter) parsed.push(filter);
    }
  }
  const name = q === undefined ? undefined : nameCondition(q, problems);
  ValidationError.throwIfAny(problems);
  return { conditions: name ? [...parsed, name] : parsed };
}
