// Loads something for a component and re-loads it when its inputs change; a stale answer
// (inputs changed meanwhile) is dropped.
import { useCallback, useEffect, useState } from "preact/hooks";

export interface Async<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => void;
  /** Shows `data` as if loaded (an answer the page already has, a write's result, say). */
  set: (data: T) => void;
}

export function useAsync<T>(load: (signal: AbortSignal) => Promise<T>, inputs: unknown[]): Async<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({
    data: undefined,
    error: undefined,
    loading: true,
  });
  const [generation, setGeneration] = useState(0);
  const reload = useCallback(() => setGeneration((n) => n + 1), []);
  const set = useCallback((data: T) => setState({ data, error: undefined, loading: false }), []);
  useEffect(() => {
    const controller = new AbortController();
    setState((previous) => ({ ...previous, loading: true, error: undefined }));
    load(controller.signal).then(
      (data) => {
        if (!controller.signal.aborted) setState({ data, error: undefined, loading: false });
      },
      (error: unknown) => {
        if (!controller.signal.aborted) setState({ data: undefined, error, loading: false });
      },
    );
    return () => controller.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...inputs, generation]);
  return { ...state, reload, set };
}
