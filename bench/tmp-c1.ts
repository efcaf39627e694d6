import { runExecuteBench } from './execute.js';
const r = await runExecuteBench({ c1Requests: 8000, c32Requests: 320 });
for (const k of Object.keys(r.c1)) console.log(k, (r.c1 as any)[k].p50Ms.toFixed(3));
