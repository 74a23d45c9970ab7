import { describe, expect, it } from 'vitest';
import { lazy } from '../../functions/core/lazy.ts';

describe('lazy', () => {
  it('makes nothing until first asked', () => {
    let made = 0;
    lazy(() => ++made);
    expect(made).toBe(0);
  });

  it('makes the value once and hands back the same one after', () => {
    let made = 0;
    const value = lazy(() => ({ made: ++made }));
    expect(value()).toBe(value());
    expect(made).toBe(1);
  });

  it('keeps a made undefined without making it again', () => {
    let made = 0;
    const value = lazy(() => {
      made += 1;
      return undefined;
    });
    value();
    value();
    expect(made).toBe(1);
  });
});
