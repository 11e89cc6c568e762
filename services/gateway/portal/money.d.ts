// What /portal/money.js holds: the console's console/money.js, served by the portal too (pages.ts).
export declare function money(minor: number, currency: string, locale?: string): string;
