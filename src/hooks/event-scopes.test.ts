import { describe, expect, it } from 'vitest';
import { missingReadScope, readScopesOf } from './event-scopes.js';
import type { Scope } from '../contracts/scopes.js';

const holding = (...scopes: Scope[]) => new Set<Scope>(['hooks:manage', ...scopes]);

describe('the read scopes a hook subscription needs', () => {
  it('task types need tasks:read, item types items:read, * both, anything else none', () => {
    expect(readScopesOf('task.overdue')).toEqual(['tasks:read']);
    expect(readScopesOf('item.deleted')).toEqual(['items:read']);
    expect(readScopesOf('*')).toEqual(['tasks:read', 'items:read']);
  });

  it('names the first scope missing, in the order the types were given', () => {
    expect(missingReadScope(['*'], holding())).toBe('tasks:read');
    expect(missingReadScope(['*'], holding('tasks:read'))).toBe('items:read');
    expect(missingReadScope(['item.created', 'task.created'], holding())).toBe('items:read');
    expect(missingReadScope(['task.created', 'item.created'], holding('tasks:read', 'items:read'))).toBeUndefined();
    expect(missingReadScope(['task.created'], holding('items:read'))).toBe('tasks:read');
  });
});
